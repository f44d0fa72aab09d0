"""Kueue's manifests as the dev cluster rewrites them (devcluster/kueue_setup.py): webhooks that
call the manager on 127.0.0.1, only for what the cluster serves, with the CA the rotator keeps."""

from __future__ import annotations

import base64
import textwrap

import pytest
import yaml

from elasticityops.devcluster import kueue_setup
from elasticityops.devcluster.certs import generate_serving_pki
from elasticityops.devcluster.kueue_setup import KueuePorts

MANIFESTS = textwrap.dedent(
    """
    ---
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingWebhookConfiguration
    metadata: {name: mutating-webhook-configuration}
    webhooks:
    - name: mjob.kb.io
      clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
      rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
    - name: mpod.kb.io
      clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
      rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
    - name: mrayjob.kb.io
      clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-ray-io-v1-rayjob}}
      rules: [{apiGroups: [ray.io], apiVersions: [v1], operations: [CREATE], resources: [rayjobs]}]
    ---
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingWebhookConfiguration
    metadata: {name: validating-webhook-configuration}
    webhooks:
    - name: vclusterqueue.kb.io
      clientConfig:
        service:
          name: webhook-service
          namespace: system
          path: /validate-kueue-x-k8s-io-v1beta2-clusterqueue
      rules:
      - apiGroups: [kueue.x-k8s.io]
        apiVersions: [v1beta2]
        operations: [CREATE]
        resources: [clusterqueues]
    """
)


def test_webhooks_call_the_manager_on_loopback_for_jobs_and_kueues_own_kinds_only() -> None:
    mutating, validating = kueue_setup.webhook_configurations(MANIFESTS, 9443, b"CA PEM")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "kueue-validating-webhook-configuration"
    assert [w["name"] for w in mutating["webhooks"]] == ["mjob.kb.io"], "pods and Ray left out"
    [job] = mutating["webhooks"]
    assert job["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-batch-v1-job",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    [queue] = validating["webhooks"]
    assert (
        queue["clientConfig"]["url"] == "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-clusterqueue"
    )


def test_crds_get_the_conversion_webhooks_their_kustomization_names() -> None:
    kustomization = "resources: [bases/a.yaml]\npatches:\n- path: patches/webhook_in_workloads.yaml\n"
    assert kueue_setup.conversion_patched(kustomization) == ["patches/webhook_in_workloads.yaml"]
    patch = yaml.safe_load(
        textwrap.dedent(
            """
            apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata: {name: workloads.kueue.x-k8s.io}
            spec:
              conversion:
                strategy: Webhook
                webhook:
                  clientConfig: {service: {namespace: system, name: webhook-service, path: /convert}}
                  conversionReviewVersions: [v1]
            """
        )
    )
    crds = [
        {"metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {"group": "kueue.x-k8s.io"}},
        {"metadata": {"name": "topologies.kueue.x-k8s.io"}, "spec": {"group": "kueue.x-k8s.io"}},
    ]
    workloads, topologies = kueue_setup.with_conversion(crds, [patch], 9443, b"CA")
    webhook = workloads["spec"]["conversion"]["webhook"]
    assert webhook["clientConfig"]["url"] == "https://127.0.0.1:9443/convert"
    assert webhook["conversionReviewVersions"] == ["v1"]
    assert "conversion" not in topologies["spec"]
    assert "conversion" not in crds[0]["spec"], "the documents read are left as they were"


def test_the_manager_listens_on_loopback_only_and_manages_batch_jobs() -> None:
    config = kueue_setup.manager_config(KueuePorts(webhook=1, health=2, metrics=3), "/state/kueue/certs")
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/state/kueue/certs"}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:3"
    assert config["integrations"]["frameworks"] == ["batch/job"]
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}, "an APIService needs a Service"


def test_feature_gates_are_set_on_top_of_the_dev_clusters_own() -> None:
    ports = KueuePorts(webhook=1, health=2, metrics=3)
    merge = {"WorkloadRequestUseMergePatch": True}
    config = kueue_setup.manager_config(ports, "/certs", feature_gates=merge)
    assert config["featureGates"] == {"VisibilityOnDemand": False, "WorkloadRequestUseMergePatch": True}
    off = kueue_setup.with_feature_gates(config, {"WorkloadRequestUseMergePatch": False})
    assert off["featureGates"]["WorkloadRequestUseMergePatch"] is False
    assert config["featureGates"]["WorkloadRequestUseMergePatch"] is True, "the given config is kept"
    assert kueue_setup.with_feature_gates(config, {}) == config
    with pytest.raises(ValueError, match="VisibilityOnDemand: its APIService needs a Service"):
        kueue_setup.manager_config(ports, "/certs", feature_gates={"VisibilityOnDemand": True})


def test_the_rotator_is_handed_a_certificate_for_the_service_and_loopback() -> None:
    from cryptography import x509

    pki = generate_serving_pki(kueue_setup.CA_NAME, (kueue_setup.SERVICE_DNS_NAME,))
    secret = kueue_setup.cert_secret(pki.ca_cert, pki.ca_key, pki.cert, pki.key)
    assert secret["metadata"] == {"name": "kueue-webhook-server-cert", "namespace": "kueue-system"}
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    cert = x509.load_pem_x509_certificate(pki.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kueue-webhook-service.kueue-system.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate(pki.ca_cert)
    ca_sans = ca.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ca_sans.get_values_for_type(x509.DNSName) == ["kueue-ca"], "cert-controller checks the CA by name"
    assert pki.ca_key.startswith(b"-----BEGIN RSA PRIVATE KEY-----"), "cert-controller reads PKCS#1"
