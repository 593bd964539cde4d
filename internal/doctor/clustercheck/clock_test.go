package clustercheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/doctor/clustercheck"
)

// skewed is an HTTP server whose Date header reads offset from our clock,
// as an etcd member's client port on a host with that skew would.
func skewed(t *testing.T, offset time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(offset).UTC().Format(http.TimeFormat))
		w.Write([]byte(`{"etcdserver":"3.7.3"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClockSkew(t *testing.T) {
	for _, tt := range []struct {
		offset time.Duration
		want   doctor.Status
		detail string
	}{
		{0, doctor.OK, "to within"},
		{2500 * time.Millisecond, doctor.Warn, "behind the clock of etcd's host"},
		{-3 * time.Second, doctor.Warn, "ahead of the clock of etcd's host"},
		{-20 * time.Second, doctor.Fail, "the claims' TTL is 30s"},
	} {
		ep := skewed(t, tt.offset)
		c, err := cluster.Open(context.Background(), cluster.Config{Endpoints: []string{ep}, HostID: "h", DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ch := clustercheck.Clock(context.Background(), c, ep, 30*time.Second)
		c.Close()
		if ch.Status != tt.want || !strings.Contains(ch.Detail, tt.detail) {
			t.Errorf("offset %v: %+v", tt.offset, ch)
		}
		// The measure is the offset, within the uncertainty it states (a
		// round trip, longer on a loaded machine) and a few tens of
		// milliseconds.
		s, err := measure(ep)
		if err != nil || (s.Offset-tt.offset).Abs() > s.Error+50*time.Millisecond {
			t.Errorf("offset %v: measured %+v %v", tt.offset, s, err)
		}
	}
}

func measure(ep string) (cluster.Skew, error) {
	c, err := cluster.Open(context.Background(), cluster.Config{Endpoints: []string{ep}, HostID: "h", DialTimeout: 2 * time.Second})
	if err != nil {
		return cluster.Skew{}, err
	}
	defer c.Close()
	return c.MeasureSkew(context.Background(), ep)
}
