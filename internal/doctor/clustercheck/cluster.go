// Package clustercheck holds the doctor's checks of the engine's [cluster]
// section: the etcd cluster several hosts share their claims through
// (internal/cluster). They run only when the section is on. They are apart
// from internal/doctor because that package is tamq's too, and the etcd
// client it would pull in weighs about 8 MB in each binary; only the
// engine's doctor imports this one.
package clustercheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/errs"
)

// SkewWarn is the clock skew to etcd's hosts worth a warning: the hosts
// compare the times of claims and leases with each other, and a second off
// is visible in them. A skew of half the claim TTL or more fails: a host
// would take a claim for fresh (or run out) half a TTL early or late.
const SkewWarn = time.Second

// Run opens the cluster as the engine would (cfg is the [cluster]
// section, file the config file for the fixes) and runs its checks:
// reachability, credentials, clock skew and what lies under the prefix.
// ttl is the claims' TTL, which the skew is judged against.
func Run(ctx context.Context, cfg config.Cluster, file, engineID string, ttl time.Duration) []doctor.Check {
	ccfg := cluster.ConfigFrom(cfg, engineID)
	c, err := cluster.Open(ctx, ccfg)
	switch {
	case errors.Is(err, cluster.ErrForeignPeer):
		// Logging in, the engine would have sent its password there.
		return []doctor.Check{fail(clusterName, err.Error(), fixOf(err, reachFix(cfg.EtcdEndpoints, file)))}
	case errs.Is(err, errs.PermissionDeny) && len(ccfg.CredentialCommand) > 0:
		// With credentials, Open authenticates, and that was refused (or
		// the command failed). Whether etcd answers is asked without them.
		anon := ccfg
		anon.CredentialCommand = nil
		a, aerr := cluster.Open(ctx, anon)
		if aerr != nil {
			return []doctor.Check{fail(clusterName, aerr.Error(), reachFix(cfg.EtcdEndpoints, file)), AuthFailed(err, file)}
		}
		defer a.Close()
		reach, _ := Reach(ctx, a, file)
		return []doctor.Check{reach, AuthFailed(err, file)}
	case errs.Is(err, errs.ConfigInvalid):
		return []doctor.Check{fail(clusterName, err.Error(), "fix the [cluster] TLS files in "+file)}
	case err != nil:
		return []doctor.Check{fail(clusterName, err.Error(), reachFix(cfg.EtcdEndpoints, file))}
	}
	defer c.Close()
	reach, up := Reach(ctx, c, file)
	checks := []doctor.Check{reach}
	if up == "" {
		return checks
	}
	auth := Auth(ctx, c, file)
	checks = append(checks, auth, Clock(ctx, c, up, ttl))
	if auth.Status != doctor.Fail {
		checks = append(checks, Prefix(ctx, c))
	}
	return checks
}

const (
	clusterName       = "cluster"
	clusterAuthName   = "cluster-auth"
	clusterClockName  = "cluster-clock"
	clusterPrefixName = "cluster-prefix"
)

func reachFix(endpoints []string, file string) string {
	return fmt.Sprintf("start etcd at %s, or fix cluster.etcd_endpoints in %s (check with `etcdctl --endpoints=%s endpoint status`)",
		strings.Join(endpoints, ", "), file, strings.Join(endpoints, ","))
}

// Reach asks every endpoint for its status, all at once. None answering
// fails (no claim can be taken); some not answering, or a member without a
// leader or with an alarm, warns: claims go on while a majority answers. A
// member that refuses our credentials answers (the auth check says the
// rest). up is an endpoint that answered ("" when none did).
func Reach(ctx context.Context, c *cluster.Claims, file string) (check doctor.Check, up string) {
	eps := c.Endpoints()
	statuses := make([]cluster.MemberStatus, len(eps))
	failures := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { statuses[i], failures[i] = c.Status(ctx, ep) })
	}
	wg.Wait()
	var down, noLeader, alarms []string
	var foreign error
	version, refused := "", 0
	for i, ep := range eps {
		switch s := statuses[i]; {
		case errors.Is(failures[i], cluster.ErrForeignPeer):
			down = append(down, ep)
			foreign = failures[i]
		case errs.Is(failures[i], errs.PermissionDeny):
			refused++
		case failures[i] != nil:
			down = append(down, ep)
		case s.Leader == 0:
			noLeader = append(noLeader, ep)
		case len(s.Errors) > 0:
			alarms = append(alarms, fmt.Sprintf("%s (%s)", ep, strings.Join(s.Errors, "; ")))
		}
		if !slices.Contains(down, ep) && up == "" {
			up = ep
		}
		if failures[i] == nil && version == "" {
			version = statuses[i].Version
		}
	}
	answered := len(eps) - len(down)
	switch {
	case foreign != nil:
		// Another user holds an endpoint: the engine refuses it, and
		// whatever answers there is not etcd.
		return fail(clusterName, foreign.Error(), fixOf(foreign, reachFix(eps, file))), ""
	case answered == 0:
		return fail(clusterName, fmt.Sprintf("no etcd endpoint answers (%s): %v", strings.Join(eps, ", "), failures[0]),
			reachFix(eps, file)), ""
	case refused == answered:
		return ok(clusterName, fmt.Sprintf("%d of %d etcd endpoints answer (and want credentials to say more)", answered, len(eps))), up
	case len(noLeader) == answered-refused:
		return fail(clusterName, fmt.Sprintf("etcd answers at %s but has no leader: it cannot take a claim", up),
			"bring a majority of the etcd members up (`etcdctl endpoint status --cluster`)"), up
	case len(down) > 0 || len(noLeader) > 0 || len(alarms) > 0:
		var what []string
		if len(down) > 0 {
			what = append(what, "not answering: "+strings.Join(down, ", "))
		}
		if len(noLeader) > 0 {
			what = append(what, "without a leader: "+strings.Join(noLeader, ", "))
		}
		if len(alarms) > 0 {
			what = append(what, "with alarms: "+strings.Join(alarms, ", "))
		}
		return warn(clusterName, fmt.Sprintf("%d of %d etcd endpoints answer; %s", answered, len(eps), strings.Join(what, "; ")),
			"claims go on while a majority of members is up; bring the others back, or drop them from cluster.etcd_endpoints in "+file), up
	}
	return ok(clusterName, fmt.Sprintf("all %d etcd endpoints answer (etcd %s)", len(eps), version)), up
}

// Auth checks that the engine may read and write under the prefix
// with its credentials (or without, when it has none): a read as every
// claim makes, and the doctor's own key written and deleted. With
// credentials, etcd must have its auth on: else it never asks for them, and
// anyone who reaches it may take claims and plant checkpoints; without,
// an etcd with auth off warns of the same.
func Auth(ctx context.Context, c *cluster.Claims, file string) doctor.Check {
	err := c.CheckRead(ctx)
	if err == nil {
		err = c.ProbeWrite(ctx)
	}
	if err != nil {
		return AuthFailed(err, file)
	}
	on, err := c.AuthEnabled(ctx)
	switch {
	case err != nil:
		return warn(clusterAuthName, "the engine reads and writes under "+c.Prefix()+", but whether etcd's auth is on is unknown: "+err.Error(),
			"`etcdctl auth status` tells")
	case !on && c.HasCredentials():
		return fail(clusterAuthName, fmt.Sprintf("etcd at %s has its auth off: it never checks cluster.credential_command's user, "+
			"and anyone who reaches it may take or drop claims and plant checkpoints under %s", strings.Join(c.Endpoints(), ", "), c.Prefix()),
			"turn etcd's auth on (`etcdctl user add root`, `etcdctl auth enable`) with a user of each host's own (docs/scale.md)")
	case !on:
		return warn(clusterAuthName, fmt.Sprintf("the engine reads and writes under %s without credentials: etcd's auth is off, "+
			"so anyone who reaches %s may take or drop claims and plant checkpoints", c.Prefix(), strings.Join(c.Endpoints(), ", ")),
			"give each host an etcd user of its own and set cluster.credential_command in "+file+" (docs/scale.md)")
	}
	return ok(clusterAuthName, "the engine reads and writes under "+c.Prefix()+" as its etcd user (etcd's auth is on)")
}

// AuthFailed is the auth check for an error: refused credentials
// fail with what to fix; any other failure says what happened.
func AuthFailed(err error, file string) doctor.Check {
	switch {
	case errs.Is(err, errs.PermissionDeny):
		return fail(clusterAuthName, err.Error(), fixOf(err,
			"make cluster.credential_command in "+file+" print user:password of an etcd user that may read and write under cluster.prefix"))
	case errs.Is(err, errs.ConfigInvalid):
		return fail(clusterAuthName, err.Error(), "fix the [cluster] TLS files in "+file)
	}
	return fail(clusterAuthName, err.Error(), fixOf(err, "see the error; `etcdctl` with the same endpoints and user tells more"))
}

// Clock measures how far this host's clock is from the clock of the
// host of the etcd member at endpoint (cluster.MeasureSkew says how), and
// judges it against ttl, the claims' TTL.
func Clock(ctx context.Context, c *cluster.Claims, endpoint string, ttl time.Duration) doctor.Check {
	s, err := c.MeasureSkew(ctx, endpoint)
	if err != nil {
		return warn(clusterClockName, "cannot compare the clocks: "+err.Error(), "check that "+endpoint+"/version answers over HTTP")
	}
	off := s.Offset.Abs()
	detail := fmt.Sprintf("this host's clock is %s %s the clock of etcd's host at %s (to within %s)",
		s.Offset.Abs().Round(time.Millisecond), aheadOrBehind(s.Offset), endpoint, s.Error.Round(time.Millisecond))
	fix := "keep the hosts' clocks in step with NTP (e.g. `sudo timedatectl set-ntp true`, then `chronyc tracking` or `timedatectl timesync-status`)"
	switch {
	case ttl > 0 && off >= ttl/2:
		return fail(clusterClockName, detail+fmt.Sprintf("; the claims' TTL is %s, and half of it is too much", ttl), fix)
	case off > SkewWarn:
		return warn(clusterClockName, detail+"; more than a second", fix)
	}
	return ok(clusterClockName, detail)
}

// aheadOrBehind says how our clock stands to etcd's, given etcd's offset.
func aheadOrBehind(offset time.Duration) string {
	if offset > 0 {
		return "behind"
	}
	return "ahead of"
}

// Prefix says how many claims are held under the prefix, and by
// which hosts, and reports keys there that are not the engine's. Keys it
// writes always have an etcd lease; one without (a claim, a record or a
// checkpoint written by hand, with `etcdctl put`) fails, as does a
// checkpoint that names another host or task than its key: someone writes
// under the prefix who should not (the engine passes them over). Claim
// keys without a holder, an older engine's keys and another program's warn:
// another program sharing the prefix could delete or forge claims.
func Prefix(ctx context.Context, c *cluster.Claims) doctor.Check {
	inv, err := c.Inventory(ctx)
	if err != nil {
		return warn(clusterPrefixName, err.Error(), "see the error")
	}
	held := fmt.Sprintf("%d claims held under %s", inv.Claims, c.Prefix())
	if inv.Claims > 0 {
		var by []string
		for _, h := range inv.Hosts() {
			by = append(by, fmt.Sprintf("%s %d", h, inv.ByHost[h]))
		}
		held += " (" + strings.Join(by, ", ") + ")"
	}
	held += fmt.Sprintf(", %d settled, %d checkpoints shared", inv.Settled, inv.Checkpoints)
	var bad, odd []string
	if inv.UnleasedCount > 0 {
		bad = append(bad, fmt.Sprintf("%d keys without an etcd lease, which the engine never writes and passes over (%s)",
			inv.UnleasedCount, strings.Join(inv.Unleased, ", ")))
	}
	if inv.ForgedCount > 0 {
		bad = append(bad, fmt.Sprintf("%d checkpoints that name another host or task than their key (%s)", inv.ForgedCount, strings.Join(inv.Forged, ", ")))
	}
	if inv.MalformedCount > 0 {
		odd = append(odd, fmt.Sprintf("%d claim keys without a holder (tasks %s)", inv.MalformedCount, strings.Join(inv.Malformed, ", ")))
	}
	if inv.OldCount > 0 {
		odd = append(odd, fmt.Sprintf("%d keys of an older engine, no longer read (%s)", inv.OldCount, strings.Join(inv.Old, ", ")))
	}
	if inv.ForeignCount > 0 {
		odd = append(odd, fmt.Sprintf("%d keys that are not the engine's (%s)", inv.ForeignCount, strings.Join(inv.Foreign, ", ")))
	}
	if len(bad) > 0 {
		return fail(clusterPrefixName, held+"; and "+strings.Join(append(bad, odd...), "; "),
			"someone writes under "+c.Prefix()+" by hand: delete those keys (`etcdctl del KEY`), and give each host an etcd user of its own "+
				"that may write only its own keys (docs/scale.md)")
	}
	if len(odd) > 0 {
		return warn(clusterPrefixName, held+"; and "+strings.Join(odd, "; "),
			"give the engine a prefix of its own (cluster.prefix), or delete those keys (`etcdctl del KEY`) if nothing uses them")
	}
	return ok(clusterPrefixName, held)
}

// The doctor's own makers of checks, by their short names.
var (
	ok    = doctor.Passed
	warn  = doctor.Warning
	fail  = doctor.Failed
	fixOf = doctor.FixOf
)
