package apitest

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// QuantityEqual compares quantities by value: cmp cannot see inside them.
var QuantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// KindsOf are the kinds of one group version.
func KindsOf(gv schema.GroupVersion) []Kind {
	var out []Kind
	for _, k := range Kinds() {
		if k.GVK.GroupVersion() == gv {
			out = append(out, k)
		}
	}
	return out
}

// SchemeRoundTrip checks that addToScheme registers every kind of gv and
// its list kind, with the meta types a client needs, and that a filled
// object of each kind and a list of two survive encoding to JSON and back
// through the scheme's codecs.
func SchemeRoundTrip(t *testing.T, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	kinds := KindsOf(gv)
	if len(kinds) == 0 {
		t.Fatalf("no kinds of %s", gv)
	}
	for _, meta := range []string{"ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "WatchEvent"} {
		if !scheme.Recognizes(gv.WithKind(meta)) {
			t.Errorf("scheme does not recognize %s (metav1.AddToGroupVersion)", gv.WithKind(meta))
		}
	}
	codecs := serializer.NewCodecFactory(scheme)
	codec := codecs.LegacyCodec(gv)
	for _, k := range kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			listGVK := gv.WithKind(k.GVK.Kind + "List")
			for gvk, want := range map[schema.GroupVersionKind]runtime.Object{k.GVK: k.New(), listGVK: k.NewList()} {
				got, err := scheme.New(gvk)
				if err != nil {
					t.Fatalf("scheme.New(%s): %v", gvk, err)
				}
				if reflect.TypeOf(got) != reflect.TypeOf(want) {
					t.Errorf("scheme.New(%s) = %T, want %T", gvk, got, want)
				}
			}
			filled := k.Filled()
			list := k.NewList()
			if err := meta.SetList(list, []runtime.Object{filled, k.Filled()}); err != nil {
				t.Fatalf("SetList: %v", err)
			}
			list.GetObjectKind().SetGroupVersionKind(listGVK)
			for _, obj := range []runtime.Object{filled, list} {
				raw, err := runtime.Encode(codec, obj)
				if err != nil {
					t.Fatalf("encode %T: %v", obj, err)
				}
				decoded, err := runtime.Decode(codecs.UniversalDeserializer(), raw)
				if err != nil {
					t.Fatalf("decode %T: %v\n%s", obj, err, raw)
				}
				if diff := cmp.Diff(obj, decoded, QuantityEqual); diff != "" {
					t.Errorf("%T changed through the scheme (-sent +decoded):\n%s", obj, diff)
				}
			}
		})
	}
}
