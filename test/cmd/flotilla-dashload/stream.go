package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/hub/dashboard"
)

// maxEvent bounds one server-sent event: a snapshot of 10,000 clusters is a
// few MiB.
const maxEvent = 64 << 20

// measureStream reads the dashboard's event stream for d and prints the
// snapshot's size and time, the delta rate, and how long after a renewal
// the stream delivered it (by the hub's clock in the renewal, the local
// clock at arrival: both are this machine's).
func measureStream(ctx context.Context, hub *hubClient, token string, d time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hub.httpAddr+"/dashboard/api/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	asked := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /dashboard/api/stream: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, maxEvent)
	var st streamStats
	var deadline time.Time
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		now := time.Now()
		if deadline.IsZero() {
			if err := st.snapshot(data); err != nil {
				return err
			}
			fmt.Fprintf(out, "snapshot: %d clusters, %d KiB, %v after the request\n",
				len(st.lastRenewal), len(data)/1024, now.Sub(asked).Round(time.Millisecond))
			deadline = now.Add(d)
			continue
		}
		if err := st.delta(data, now); err != nil {
			return err
		}
		if now.After(deadline) {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	st.print(out, d)
	return nil
}

// streamStats follows the clusters' renewals through the stream.
type streamStats struct {
	lastRenewal             map[string]int64
	batches, clusters, size int
	delays                  []time.Duration
}

func (s *streamStats) snapshot(data string) error {
	var snap dashboard.Snapshot
	if err := json.Unmarshal([]byte(data), &snap); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.lastRenewal = make(map[string]int64, len(snap.Clusters))
	for _, c := range snap.Clusters {
		s.lastRenewal[c.Name] = c.LastRenewal
	}
	return nil
}

func (s *streamStats) delta(data string, now time.Time) error {
	var d dashboard.Delta
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		return fmt.Errorf("delta: %w", err)
	}
	s.batches++
	s.size += len(data)
	s.clusters += len(d.Clusters)
	for _, c := range d.Clusters {
		prev := s.lastRenewal[c.Name]
		s.lastRenewal[c.Name] = c.LastRenewal
		if prev > 0 && c.LastRenewal > prev {
			s.delays = append(s.delays, now.Sub(time.UnixMilli(c.LastRenewal)))
		}
	}
	return nil
}

func (s *streamStats) print(out io.Writer, d time.Duration) {
	secs := d.Seconds()
	fmt.Fprintf(out, "deltas: %.1f/s, %.0f clusters/s, %.0f KiB/s\n",
		float64(s.batches)/secs, float64(s.clusters)/secs, float64(s.size)/1024/secs)
	if n := len(s.delays); n > 0 {
		slices.Sort(s.delays)
		fmt.Fprintf(out, "renewal → stream: p50 %v, p99 %v, max %v (%d renewals)\n",
			s.delays[n/2].Round(time.Millisecond), s.delays[n*99/100].Round(time.Millisecond), s.delays[n-1].Round(time.Millisecond), n)
	}
}
