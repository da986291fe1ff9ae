// Package metacreate creates objects through a controller-runtime client
// but asks the API server to answer with the new object's metadata only.
//
// A create's answer is by default the whole object as stored: for a
// JobSet, its pod templates again. The operator never reads them back (it
// built them), yet the API server encodes them and the operator decodes
// them, once per job. The API server's response transform
// (as=PartialObjectMetadata, the content negotiation the metadata client
// uses for reads) applies to creates too, for built-in kinds and custom
// resources alike.
package metacreate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// accept asks for the object's metadata, or the object itself from a
// server that cannot transform it.
const accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// Client is a controller-runtime client whose Create reads back only the
// metadata of what it created. Every other call goes to the client it
// wraps.
type Client struct {
	client.Client
	config *rest.Config
	http   *http.Client
	codecs serializer.CodecFactory

	mu      sync.Mutex
	clients map[schema.GroupVersionKind]rest.Interface
}

// Wrap returns c with metadata-only creates, made with config and
// httpClient (a manager's GetConfig and GetHTTPClient).
func Wrap(c client.Client, config *rest.Config, httpClient *http.Client) *Client {
	return &Client{
		Client:  c,
		config:  config,
		http:    httpClient,
		codecs:  serializer.NewCodecFactory(c.Scheme()),
		clients: map[schema.GroupVersionKind]rest.Interface{},
	}
}

// Create creates obj and sets on it the metadata the API server gave it
// (name, UID, resource version, creation time, and whatever admission
// added to its labels, annotations, finalizers and owners; not its
// managedFields); obj's spec stays as sent. Unstructured objects and create options go to the wrapped
// client.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(runtime.Unstructured); ok || len(opts) > 0 {
		return c.Client.Create(ctx, obj, opts...)
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	rc, err := c.restClient(gvk)
	if err != nil {
		return err
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	raw, err := rc.Post().
		NamespaceIfScoped(obj.GetNamespace(), namespaced).
		Resource(mapping.Resource.Resource).
		SetHeader("Accept", accept).
		Body(obj).
		Do(ctx).
		Raw()
	if err != nil {
		// client-go reads no Status from an answer whose media type
		// carries the transform's parameters: the error would lose the
		// server's message.
		var status metav1.Status
		if json.Unmarshal(raw, &status) == nil && status.Kind == "Status" && status.Status == metav1.StatusFailure {
			return &apierrors.StatusError{ErrStatus: status}
		}
		return err
	}
	var created answer
	if err := json.Unmarshal(raw, &created); err != nil {
		return fmt.Errorf("reading the answer to creating %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if created.Kind != "PartialObjectMetadata" {
		// The server sent the object: read it whole, as client.Create does.
		return runtime.DecodeInto(c.codecs.UniversalDecoder(gvk.GroupVersion()), raw, obj)
	}
	m := created.Metadata
	if m.Name != obj.GetName() && obj.GetName() != "" {
		return apierrors.NewInternalError(fmt.Errorf("creating %s %s: the API server answered for %q", gvk.Kind, obj.GetName(), m.Name))
	}
	obj.SetName(m.Name)
	obj.SetUID(m.UID)
	obj.SetResourceVersion(m.ResourceVersion)
	obj.SetGeneration(m.Generation)
	obj.SetCreationTimestamp(m.CreationTimestamp)
	obj.SetLabels(m.Labels)
	obj.SetAnnotations(m.Annotations)
	obj.SetFinalizers(m.Finalizers)
	obj.SetOwnerReferences(m.OwnerReferences)
	return nil
}

// answer is what Create reads of a PartialObjectMetadata answer: its
// managedFields, most of it, are skipped rather than decoded (the
// operator's cache drops them too).
type answer struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name              string                  `json:"name"`
		UID               types.UID               `json:"uid"`
		ResourceVersion   string                  `json:"resourceVersion"`
		Generation        int64                   `json:"generation"`
		CreationTimestamp metav1.Time             `json:"creationTimestamp"`
		Labels            map[string]string       `json:"labels"`
		Annotations       map[string]string       `json:"annotations"`
		Finalizers        []string                `json:"finalizers"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

// restClient is the REST client for gvk's resource, made once: the same
// content type (protobuf for built-in kinds) and HTTP client as the
// wrapped client's.
func (c *Client) restClient(gvk schema.GroupVersionKind) (rest.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.clients[gvk]; ok {
		return rc, nil
	}
	rc, err := apiutil.RESTClientForGVK(gvk, false, false, c.config, c.codecs, c.http)
	if err != nil {
		return nil, fmt.Errorf("a REST client for %s: %w", gvk, err)
	}
	c.clients[gvk] = rc
	return rc, nil
}
