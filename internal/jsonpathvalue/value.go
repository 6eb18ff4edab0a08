package jsonpathvalue

import (
	"bytes"
	"errors"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/jsonpath"
)

// MaxBytes bounds what one template prints: one byte more than a label
// value holds, so that a value too long to be a label is seen to be so
// (and refused) rather than cut to something that names another state.
const MaxBytes = validation.LabelValueMaxLength + 1

// Eval evaluates template on doc, a decoded JSON document (maps, slices
// and scalars as encoding/json or unstructured objects hold them). The
// value is at most MaxBytes long: a longer one is cut there, without an
// error.
func Eval(doc any, template string) (string, error) {
	j := jsonpath.New("statePreservation")
	j.AllowMissingKeys(false)
	if err := j.Parse(template); err != nil {
		return "", fmt.Errorf("parse JSONPath %q: %w", template, err)
	}
	w := &boundedBuffer{limit: MaxBytes}
	if err := j.Execute(w, doc); err != nil && !errors.Is(err, errTooLong) {
		return "", fmt.Errorf("evaluate JSONPath %q: %w", template, err)
	}
	return w.String(), nil
}

// FromJSON evaluates template on a JSON document, as Eval. Integers are
// decoded as int64, as in the objects the agent reads, so 1700000000
// prints as written and not as 1.7e+09.
func FromJSON(raw []byte, template string) (string, error) {
	var doc any
	if err := utiljson.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("read the document: %w", err)
	}
	return Eval(doc, template)
}

var errTooLong = errors.New("value too long")

// boundedBuffer keeps at most limit bytes and fails writes past them.
type boundedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); len(p) > room {
		b.Buffer.Write(p[:max(room, 0)])
		return max(room, 0), errTooLong
	}
	return b.Buffer.Write(p)
}
