package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OpenShift AI (and Open Data Hub) configures its components in a
// DataScienceCluster, cluster-scoped and usually one. From API version v2
// its trainer component runs a Kubeflow Trainer controller of its own,
// which Torus replaces: both would reconcile every TrainJob, and the
// operator does not start beside it. Removed takes the controller and the
// component's own runtimes away and leaves the Trainer CRDs, and so every
// TrainJob, in place; an empty state reads as Removed.
const (
	dscGroup      = "datasciencecluster.opendatahub.io"
	dscTrainerOn  = "Managed"
	dscTrainerOff = "Removed"
)

var dscList = schema.GroupVersionKind{Group: dscGroup, Version: "v2", Kind: "DataScienceClusterList"}

// dscTrainerPath is the trainer component's state in a v2 DataScienceCluster.
var dscTrainerPath = []string{"spec", "components", "trainer", "managementState"}

// openShiftAI checks that no DataScienceCluster manages OpenShift AI's own
// Trainer controller. ok is false on a cluster without OpenShift AI.
func (d *doctor) openShiftAI(ctx context.Context) (r result, ok bool) {
	v2, v1 := d.groups[dscList.GroupVersion().String()], d.groups[dscGroup+"/v1"]
	if !v1 && !v2 {
		return result{}, false
	}
	r = result{Check: "OpenShift AI"}
	if !v2 {
		r.Status, r.Message = pass, "DataScienceCluster v1: this OpenShift AI has no trainer component, so no Trainer controller of its own"
		return r, true
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(dscList)
	if err := d.Client.List(ctx, &list); err != nil {
		r.Status, r.Message = warn, "cannot read the DataScienceClusters: "+firstLine(err)
		r.Fix = "ask a cluster administrator to check that each DataScienceCluster's spec.components.trainer.managementState is " + dscTrainerOff
		return r, true
	}
	var managed, removed []string
	for _, dsc := range list.Items {
		state, _, _ := unstructured.NestedString(dsc.Object, dscTrainerPath...)
		if state == dscTrainerOn {
			managed = append(managed, dsc.GetName())
		} else {
			removed = append(removed, dsc.GetName())
		}
	}
	sort.Strings(managed)
	sort.Strings(removed)
	switch {
	case len(managed) > 0:
		r.Status = fail
		r.Message = fmt.Sprintf("DataScienceCluster %s runs OpenShift AI's own Trainer controller (spec.components.trainer.managementState: %s): "+
			"it and Torus would both reconcile every TrainJob, and the Torus operator does not start beside it", strings.Join(managed, ", "), dscTrainerOn)
		var patches []string
		for _, name := range managed {
			patches = append(patches, dscTrainerPatch(name))
		}
		r.Fix = "set the trainer component to " + dscTrainerOff + ": " + strings.Join(patches, "; ") +
			". OpenShift AI then removes its Trainer controller and its own runtimes, and keeps the Trainer CRDs and every TrainJob (docs/admins/openshift.md)"
	case len(removed) == 0:
		r.Status, r.Message = pass, "no DataScienceCluster: OpenShift AI runs no Trainer controller"
	default:
		r.Status = pass
		r.Message = fmt.Sprintf("DataScienceCluster %s: the trainer component is %s, so Torus is the cluster's Trainer controller", strings.Join(removed, ", "), dscTrainerOff)
	}
	return r, true
}

// dscTrainerPatch is the command that sets a DataScienceCluster's trainer
// component to Removed.
func dscTrainerPatch(name string) string {
	return fmt.Sprintf(`oc patch datasciencecluster %s --type merge -p '{"spec":{"components":{"trainer":{"managementState":"%s"}}}}'`, name, dscTrainerOff)
}
