// Package runtimes installs the default MPI ClusterTrainingRuntimes (one per
// MPI implementation, the files in samples/runtimes) when the operator
// starts, so that every install path (OperatorHub, whose bundles cannot
// carry such objects, and kustomize) ships them.
//
// It writes them with server-side apply under its own field manager and
// never forces: a field an administrator changed stays theirs (the apply
// conflicts and the runtime is left as it is), fields they added are kept,
// and a runtime nobody changed follows the operator's version.
package runtimes

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/samples"
)

// FieldManager owns the fields the operator writes in default runtimes.
const FieldManager = "torus-operator-runtimes"

// UserMode says which UID the default runtimes fix.
type UserMode string

const (
	// UserAuto fixes mpi.DefaultRunAsUser unless the cluster has SCCs.
	UserAuto UserMode = "auto"
	// UserPlatform fixes none: the platform's admission or the image decides.
	UserPlatform UserMode = "platform"
	// UserImage fixes mpi.DefaultRunAsUser.
	UserImage UserMode = "image"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=clustertrainingruntimes,verbs=create;patch

// Installer applies the default runtimes once the manager runs (as leader),
// retrying while the API server or the operator's own webhook (which admits
// runtimes) is not reachable yet.
type Installer struct {
	Client client.Client
	// Mapper tells whether the cluster has SCCs (UserAuto).
	Mapper meta.RESTMapper
	User   UserMode
	Log    logr.Logger
	// Backoff paces retries (startup.Task).
	Backoff wait.Backoff
}

// Validate checks the settings.
func (i *Installer) Validate() error {
	switch i.User {
	case UserAuto, UserPlatform, UserImage, "":
		return nil
	}
	return fmt.Errorf("unknown mode %q: use auto, platform or image", i.User)
}

// Runnable is the installer as a manager runnable: once, on the leader,
// retried until done.
func (i *Installer) Runnable() *startup.Task {
	return &startup.Task{What: "installing the default runtimes", Do: i.Install, Log: i.Log, Backoff: i.Backoff}
}

// Install applies every default runtime once.
func (i *Installer) Install(ctx context.Context) error {
	uid, err := i.runAsUser()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range samples.RuntimeNames() {
		obj, err := Desired(name, uid)
		if err != nil {
			return err
		}
		err = i.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager))
		switch {
		case err == nil:
			i.Log.V(1).Info("Default runtime applied", "runtime", name)
		case apierrors.IsConflict(err):
			// An administrator changed a field the operator sets:
			// theirs wins, and nothing else is applied either.
			i.Log.Info("Default runtime left as an administrator changed it", "runtime", name, "conflict", err.Error())
		default:
			errs = append(errs, fmt.Errorf("applying runtime %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// runAsUser is the UID to fix, nil for none.
func (i *Installer) runAsUser() (*int64, error) {
	uid := mpi.DefaultRunAsUser
	switch i.User {
	case UserPlatform:
		return nil, nil
	case UserImage:
		return &uid, nil
	case UserAuto, "":
		scc, err := startup.Served(i.Mapper, startup.SCCKind)
		if err != nil || scc {
			return nil, err
		}
		return &uid, nil
	}
	return nil, fmt.Errorf("unknown user mode %q (auto, platform or image)", i.User)
}

// Desired is the default runtime of that name as the operator applies it:
// the sample's own fields, labelled, with uid as every pod's runAsUser when
// set.
func Desired(name string, uid *int64) (*unstructured.Unstructured, error) {
	data, err := samples.RuntimeManifest(name)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("decoding runtime %s: %w", name, err)
	}
	if obj.GetName() != name {
		return nil, fmt.Errorf("sample runtime file %s.yaml names %q", name, obj.GetName())
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[api.LabelDefaultRuntime] = "true"
	obj.SetLabels(labels)
	if uid == nil {
		return obj, nil
	}
	jobs, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "replicatedJobs")
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("runtime %s: a replicated job is not an object", name)
		}
		if err := unstructured.SetNestedField(job, *uid, "template", "spec", "template", "spec", "securityContext", "runAsUser"); err != nil {
			return nil, fmt.Errorf("runtime %s: %w", name, err)
		}
	}
	if err := unstructured.SetNestedSlice(obj.Object, jobs, "spec", "template", "spec", "replicatedJobs"); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	return obj, nil
}
