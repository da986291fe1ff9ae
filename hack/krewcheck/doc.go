// Package krewcheck checks Torus's krew plugin manifest (krew/mpi.yaml as
// make release fills it) with krew's own types, against the rules
// krew-index enforces on submissions.
//
// It is a module of its own: krew v0.4.4 requires k8s.io/client-go
// v11.0.0+incompatible, which minimal version selection ranks above every
// v0.x release, so the main module would need a replace of client-go for
// everyone; here the replace stays in one small, separate go.mod.
//
//	cd hack/krewcheck && go test ./...                               # a placeholder release, built by the test
//	cd hack/krewcheck && KREW_RELEASE_DIR=$PWD/../../dist/release go test ./...   # the real one (make release)
package krewcheck
