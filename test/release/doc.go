// Package release verifies a release as a platform team does, with cosign's
// own verification (its Go module, sigstore/cosign): the signature and the
// SLSA provenance of each image index, the chart and the static manifests,
// against the public key alone and no transparency log, as `cosign verify
// --key cosign.pub --insecure-ignore-tlog=true` and `cosign
// verify-attestation --type slsaprovenance1` do, and that a tampered
// artifact fails; and that the static manifests are what `helm template`
// prints of the released chart. cosign's dependencies (Rekor, Fulcio and
// TUF clients, sigstore-go) stay out of the product's module.
package release
