package docgen

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// maxLabels bounds the label values Families tries to give a vector.
const maxLabels = 16

// Families gathers the metric families of cs, each with at least one
// series: a vector without series gets one, with empty label values, for
// the time of the gathering. The collectors must not be served meanwhile.
// Every Collector must describe itself consistently with what it collects
// (the registry is pedantic).
func Families(cs ...prometheus.Collector) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	var cleanups []func()
	defer func() {
		for _, c := range cleanups {
			c()
		}
	}()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register %s: %w", describe(c), err)
		}
		cleanup, err := instantiate(c)
		if err != nil {
			return nil, err
		}
		if cleanup != nil {
			cleanups = append(cleanups, cleanup)
		}
	}
	return reg.Gather()
}

// vector is what the four kinds of metric vectors share.
type vector interface {
	prometheus.Collector
	DeleteLabelValues(...string) bool
}

// instantiate gives c a series if it is a vector without one, and returns
// how to remove it again.
func instantiate(c prometheus.Collector) (func(), error) {
	v, ok := c.(vector)
	if !ok || collects(c) {
		return nil, nil
	}
	var get func(...string) error
	switch v := v.(type) {
	case *prometheus.CounterVec:
		get = func(values ...string) error { _, err := v.GetMetricWithLabelValues(values...); return err }
	case *prometheus.GaugeVec:
		get = func(values ...string) error { _, err := v.GetMetricWithLabelValues(values...); return err }
	case *prometheus.HistogramVec:
		get = func(values ...string) error { _, err := v.GetMetricWithLabelValues(values...); return err }
	case *prometheus.SummaryVec:
		get = func(values ...string) error { _, err := v.GetMetricWithLabelValues(values...); return err }
	default:
		return nil, fmt.Errorf("%s: a vector of an unknown kind %T", describe(c), c)
	}
	// The number of labels is the one the vector accepts.
	for n := 0; n <= maxLabels; n++ {
		values := make([]string, n)
		if get(values...) == nil {
			return func() { v.DeleteLabelValues(values...) }, nil
		}
	}
	return nil, fmt.Errorf("%s: no series with up to %d labels", describe(c), maxLabels)
}

// collects reports whether c has a series now.
func collects(c prometheus.Collector) bool {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n > 0
}

// Descs returns what c describes, as the descriptors' strings: a way to
// compare collectors' families without gathering them.
func Descs(cs ...prometheus.Collector) []string {
	var out []string
	for _, c := range cs {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			out = append(out, d.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// describe names c in errors by its descriptors.
func describe(c prometheus.Collector) string {
	return strings.Join(Descs(c), ", ")
}

// Without returns families without those whose names start with one of
// prefixes, such as the Go runtime's and the process's (go_, process_),
// which their libraries document.
func Without(families []*dto.MetricFamily, prefixes ...string) []*dto.MetricFamily {
	return slices.DeleteFunc(slices.Clone(families), func(f *dto.MetricFamily) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(f.GetName(), p) })
	})
}

// MetricTable renders families, sorted by name, as a Markdown table: the
// name, the type, the label names (variable and constant) and the help.
func MetricTable(families []*dto.MetricFamily) (string, error) {
	sorted := slices.Clone(families)
	slices.SortFunc(sorted, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	t := newTable("metric", "type", "labels", "help")
	var errs []error
	for _, f := range sorted {
		if len(f.GetMetric()) == 0 {
			errs = append(errs, fmt.Errorf("%s: no series to read the labels from", f.GetName()))
			continue
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		cell := ""
		if len(labels) > 0 {
			cell = code(strings.Join(labels, ", "))
		}
		t.row(code(f.GetName()), strings.ToLower(f.GetType().String()), cell, text(f.GetHelp()))
	}
	return t.String(), errors.Join(errs...)
}
