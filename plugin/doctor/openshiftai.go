package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// OpenShift AI (and Open Data Hub) configures its components in a
// DataScienceCluster, cluster-scoped and usually one. From API version v2
// its trainer component runs a Kubeflow Trainer controller of its own,
// which Torus replaces: both would reconcile every TrainJob, and the
// operator does not start beside it. Removed takes the controller and the
// component's own runtimes away and leaves the Trainer CRDs, and so every
// TrainJob, in place; an unset state reads as Removed.
const (
	dscGroup      = "datasciencecluster.opendatahub.io"
	dscKind       = "DataScienceClusterList"
	dscTrainerOn  = "Managed"
	dscTrainerOff = "Removed"
)

// dscTrainerPath is the trainer component's state in a DataScienceCluster
// from v2 on.
var dscTrainerPath = []string{"spec", "components", "trainer", "managementState"}

// openShiftAI checks that no DataScienceCluster manages OpenShift AI's own
// Trainer controller. ok is false on a cluster without OpenShift AI.
func (d *doctor) openShiftAI(ctx context.Context) (r result, ok bool) {
	served := dscVersions(d.groups)
	if len(served) == 0 {
		return result{}, false
	}
	if served[0] == "v1" {
		return result{Check: dscCheck, Status: pass,
			Message: "DataScienceCluster v1: this OpenShift AI has no trainer component, so no Trainer controller of its own"}, true
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: dscGroup, Version: served[0], Kind: dscKind})
	err := d.Client.List(ctx, &list)
	return dscVerdict(list.Items, err), true
}

const dscCheck = "OpenShift AI"

// dscVersions are the versions of the DataScienceCluster API the cluster
// serves, newest first.
func dscVersions(groups map[string]bool) []string {
	var versions []string
	for gv := range groups {
		if g, v, ok := strings.Cut(gv, "/"); ok && g == dscGroup {
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0 })
	return versions
}

// dscVerdict judges the DataScienceClusters listed (err, if the list
// failed): one whose trainer component is Managed fails the check.
func dscVerdict(dscs []unstructured.Unstructured, err error) result {
	r := result{Check: dscCheck}
	if err != nil {
		r.Status, r.Message = warn, "cannot read the DataScienceClusters: "+firstLine(err)
		r.Fix = "ask a cluster administrator to check that each DataScienceCluster's spec.components.trainer.managementState is " + dscTrainerOff
		return r
	}
	var managed, off []string
	for _, dsc := range dscs {
		state, _, _ := unstructured.NestedString(dsc.Object, dscTrainerPath...)
		switch state {
		case dscTrainerOn:
			managed = append(managed, dsc.GetName())
		case "":
			off = append(off, dsc.GetName()+" (unset, which reads as "+dscTrainerOff+")")
		default:
			off = append(off, dsc.GetName()+" ("+state+")")
		}
	}
	sort.Strings(managed)
	sort.Strings(off)
	switch {
	case len(managed) > 0:
		r.Status = fail
		r.Message = fmt.Sprintf("DataScienceCluster %s runs OpenShift AI's own Trainer controller (spec.components.trainer.managementState: %s): "+
			"it and Torus would both reconcile every TrainJob, and the Torus operator does not start beside it", strings.Join(managed, ", "), dscTrainerOn)
		var patches []string
		for _, name := range managed {
			patches = append(patches, dscTrainerPatch(name))
		}
		r.Fix = "once OpenShift AI's TrainJobs are done, set the trainer component to " + dscTrainerOff + ": " + strings.Join(patches, "; ") +
			". OpenShift AI then removes its Trainer controller and its own runtimes, and keeps the Trainer CRDs and every TrainJob (docs/admins/openshift.md)"
	case len(off) == 0:
		r.Status, r.Message = pass, "no DataScienceCluster: OpenShift AI runs no Trainer controller"
	default:
		r.Status = pass
		r.Message = fmt.Sprintf("the trainer component of DataScienceCluster %s is not %s, so Torus is the cluster's Trainer controller", strings.Join(off, ", "), dscTrainerOn)
	}
	return r
}

// dscTrainerPatch is the command that sets a DataScienceCluster's trainer
// component to Removed.
func dscTrainerPatch(name string) string {
	return fmt.Sprintf(`oc patch datasciencecluster %s --type merge -p '{"spec":{"components":{"trainer":{"managementState":"%s"}}}}'`, name, dscTrainerOff)
}
