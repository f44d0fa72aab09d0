"""Render the GPU elasticity stack for a long-running GPU service (a Deployment).

device plugin -> DCGM exporter -> Prometheus -> Prometheus Adapter -> custom metrics API -> HPA.
`render_elasticity(ElasticityInputs) -> ElasticityRender` is pure; the CLI writes the files.

Where each piece commonly breaks, and what the render does about it:
- The device plugin only runs where a GPU is: node affinity on the GPU label and a toleration of
  GKE's `nvidia.com/gpu` taint. On GKE the plugin is managed by GKE (do not install a second one).
- DCGM exporter labels series with the *GPU's* pod (`pod`, `namespace`); after a Prometheus scrape
  they become `exported_pod` / `exported_namespace` (the scrape target's own labels win). Adapter
  rules that map `pod`/`namespace` then match the exporter pod, not the workload, and the HPA
  shows `<unknown>`. The rules here map the exported labels.
- GPU utilisation is a good signal only when one pod serves many requests at once. When one
  request saturates the GPU (one request per pod, as ElasticityOps jobs do), utilisation is ~100%
  at any load: the HPA climbs to max and stays there. Queue depth per replica is the signal then.

Modules: inputs.py (what is asked), checks.py (refused before rendering), manifests.py (each
object), render.py (the files and their README)."""
