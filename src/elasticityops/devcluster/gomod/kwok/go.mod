// Wrapper module: pins the kwok controller (sigs.k8s.io/kwok/cmd/kwok). Its stock stage YAML
// (kustomize/stage/...) is read from the module cache at build time, never copied into the repo.
module elasticityops.local/devcluster/kwok

go 1.26.0

require sigs.k8s.io/kwok v0.8.0
