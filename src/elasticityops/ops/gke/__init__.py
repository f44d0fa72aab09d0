"""Render a GKE cluster set up for one-request-one-GPU-node functions, sized from the peak.

`render.render_gke(GkeInputs) -> GkeRender` is pure: it returns the script text, the manifests as
data and the sizing with its reasons; the CLI writes the files. What it encodes (each rule is
stated again in the rendered output, so the reviewer sees why):

- Node auto-provisioning (NAP) creates and deletes GPU node pools by itself. Never one node pool
  per request: a cluster's node pool count is limited and a pool creation is minutes slow.
- GPU limit = peak x (1 + margin), rounded up to the next step of 5 in the peak's second
  significant digit (4,000 -> 4,400 -> 4,500; 60 -> 66 -> 70). The same number is the GPU quota
  to request, because NAP's limit is useless above the project's quota.
- CPU / memory NAP limits count every pool (system + baseline + auto-provisioned), so they are
  sized for the GPU limit's worth of GPU machines plus the system pool; they are what really caps
  the node count when fallbacks (L4) have limits of their own.
- At most 1,000 nodes per node pool per zone: the peak needs ceil(peak / 1,000) pool-zones.
- Pod and node IP ranges are sized for the limit (the default /14 pod range holds only 1,024
  nodes at 110 pods per node).

One module per job: `inputs` (the flags and the GPU shapes), `checks` (refusals that name the flag
and the fix), `sizing` (every number and its rule), `objects` (the ComputeClass and NAP's config),
`script` (the reviewed gcloud script) and `render` (all of them, as files).
"""
