package apitest

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Epoch is the first time Fill sets; later ones are a second apart. Times
// have whole seconds in UTC, as they survive JSON.
var Epoch = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// quantities are the values Fill gives resource quantities, in canonical
// form, so they read back as written.
var quantities = []string{"500m", "2", "8Gi", "100"}

// Fill sets every exported field of the struct obj points to, recursively:
// strings to their field name and a counter, numbers to the counter (so
// never zero), booleans to true, slices and maps to two elements, pointers
// to a new value. TypeMeta, ObjectMeta and ListMeta are left alone (set
// them to suit the kind). Types with rules of their own get values that
// follow them: conditions (CamelCase reasons, distinct types), quantities,
// times, and raw extensions (a JSON object with nested values and a null).
func Fill(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("apitest.Fill needs a non-nil pointer, got %T", obj))
	}
	f := &filler{}
	f.fill(v.Elem(), strings.ToLower(v.Elem().Type().Name()))
}

type filler struct{ n int }

// next counts the values set so far.
func (f *filler) next() int {
	f.n++
	return f.n
}

var (
	typeMetaType  = reflect.TypeFor[metav1.TypeMeta]()
	objectMeta    = reflect.TypeFor[metav1.ObjectMeta]()
	listMetaType  = reflect.TypeFor[metav1.ListMeta]()
	timeType      = reflect.TypeFor[metav1.Time]()
	conditionType = reflect.TypeFor[metav1.Condition]()
	quantityType  = reflect.TypeFor[resource.Quantity]()
	rawType       = reflect.TypeFor[runtime.RawExtension]()
)

func (f *filler) fill(v reflect.Value, name string) {
	switch v.Type() {
	case typeMetaType, objectMeta, listMetaType:
		return
	case timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(Epoch.Add(time.Duration(f.next()) * time.Second))))
		return
	case conditionType:
		n := f.next()
		v.Set(reflect.ValueOf(metav1.Condition{
			Type: fmt.Sprintf("Condition%d", n), Status: metav1.ConditionTrue, ObservedGeneration: int64(n),
			LastTransitionTime: metav1.NewTime(Epoch.Add(time.Duration(n) * time.Second)),
			Reason:             fmt.Sprintf("Reason%d", n), Message: fmt.Sprintf("message %d", n),
		}))
		return
	case quantityType:
		v.Set(reflect.ValueOf(resource.MustParse(quantities[f.next()%len(quantities)])))
		return
	case rawType:
		n := f.next()
		raw := fmt.Sprintf(`{"apiVersion":"example.io/v1","kind":"Thing","metadata":{"name":"thing-%d","creationTimestamp":null},`+
			`"spec":{"count":%d,"ratio":0.5,"list":[1,"two",true,null,{"deep":{}}],"empty":{},"none":null}}`, n, n)
		v.Set(reflect.ValueOf(runtime.RawExtension{Raw: []byte(raw)}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if field.IsExported() {
				f.fill(v.Field(i), strings.ToLower(field.Name))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), name)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			f.fill(v.Index(i), name)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			key, value := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(key, name+"-key")
			f.fill(value, name)
			v.SetMapIndex(key, value)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", name, f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	default:
		panic(fmt.Sprintf("apitest.Fill: no rule for %s (%s)", v.Type(), name))
	}
}
