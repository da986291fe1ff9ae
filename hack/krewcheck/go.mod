module github.com/torus-mpi/torus/hack/krewcheck

go 1.26.0

require (
	k8s.io/apimachinery v0.27.3
	sigs.k8s.io/krew v0.4.4
	sigs.k8s.io/yaml v1.3.0
)

require (
	github.com/go-logr/logr v1.2.4 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/google/gofuzz v1.2.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	golang.org/x/net v0.12.0 // indirect
	golang.org/x/text v0.11.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	k8s.io/klog/v2 v2.100.1 // indirect
	k8s.io/utils v0.0.0-20230711102312-30195339c3c7 // indirect
	sigs.k8s.io/json v0.0.0-20221116044647-bc3834ca7abd // indirect
	sigs.k8s.io/structured-merge-diff/v4 v4.3.0 // indirect
)

// krew v0.4.4 requires k8s.io/client-go v11.0.0+incompatible, which minimal
// version selection ranks above every v0.x release; pin the release the
// main module uses.
replace k8s.io/client-go => k8s.io/client-go v0.36.2
