package promcheck

import (
	"bytes"
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Gather exposes g in the text format, as /metrics serves it, and returns
// the parsed families with the problems Problems finds in the exposition.
func Gather(g prometheus.Gatherer) (families map[string]*dto.MetricFamily, problems []string, err error) {
	gathered, err := g.Gather()
	if err != nil {
		return nil, nil, fmt.Errorf("gather: %w", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range gathered {
		if err := enc.Encode(mf); err != nil {
			return nil, nil, fmt.Errorf("encode %s: %w", mf.GetName(), err)
		}
	}
	if problems, err = Problems(buf.Bytes()); err != nil {
		return nil, nil, err
	}
	families, err = Parse(buf.Bytes())
	return families, problems, err
}

// Value is the value of the family's first series whose labels include
// want: a gauge's or counter's value, a histogram's sample count; NaN if
// there is none.
func Value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := families[name]
	if mf == nil {
		return math.NaN()
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return math.NaN()
}
