package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/internal/redislocal"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// Cases of the control-plane half that the conformance suites leave out:
// exact sums past 2^53, Seqs in byte order, and what a delete or a purge
// leaves in Redis.

func randomID(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "ns-" + hex.EncodeToString(b[:])
}

const t0h = int64(1_700_000_000_000) / 3_600_000 * 3_600_000

func usageOf(t *testing.T, s store.UsageStore, ns, entity string) []store.UsageSnapshot {
	t.Helper()
	snaps, err := s.ListUsage(context.Background(), ns, store.UsageQuery{Entity: entity, Window: store.Hourly, From: t0h, To: t0h + 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

// Sums are exact at any size (Lua's numbers would round past 2^53), and
// Seqs compare as bytes ("B" < "a"), whatever the server's locale.
func TestUsageExact(t *testing.T) {
	s, ns, ctx := newStore(t), randomID(t), context.Background()
	k := store.UsageKey{Entity: "e", Resource: "api", Window: store.Hourly, Start: t0h}
	big := int64(1)<<62 - 1
	add := func(seq string, n int64) {
		t.Helper()
		if err := s.AddUsage(ctx, ns, []store.UsageIncrement{{Key: k, Source: "src", Seq: seq, Events: 1, Consumed: map[string]int64{"tpm": n}}}); err != nil {
			t.Fatal(err)
		}
	}
	add("A", big)
	add("B", 1)
	add("a", -3)
	add("B", 1000) // "B" < "a": applied already
	snaps := usageOf(t, s, ns, "e")
	if len(snaps) != 1 || snaps[0].Consumed["tpm"] != big-2 || snaps[0].Events != 3 {
		t.Fatalf("snapshots %+v, want tpm %d and 3 events", snaps, big-2)
	}
}

// DeleteEntity deletes the entity's usage snapshots (as the other
// backends do) and nobody else's.
func TestDeleteEntityDropsUsage(t *testing.T) {
	s, ns, ctx := newStore(t), randomID(t), context.Background()
	for _, id := range []string{"e", "other"} {
		if err := s.CreateEntity(ctx, ns, model.Entity{ID: id}, model.AuditEvent{ID: "01" + id, Entity: id}); err != nil {
			t.Fatal(err)
		}
		for _, w := range []model.Window{store.Hourly, store.Daily} {
			k := store.UsageKey{Entity: id, Resource: "api", Window: w, Start: w.Start(t0h)}
			in := store.UsageIncrement{Key: k, Source: "s", Seq: "1", Events: 1, Expires: time.Now().Add(time.Hour).UnixMilli()}
			if err := s.AddUsage(ctx, ns, []store.UsageIncrement{in}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.DeleteEntity(ctx, ns, "e", model.AuditEvent{ID: "02", Entity: "e"}); err != nil {
		t.Fatal(err)
	}
	if got := usageOf(t, s, ns, "e"); len(got) != 0 {
		t.Errorf("usage of the deleted entity: %+v", got)
	}
	if got := usageOf(t, s, ns, "other"); len(got) != 1 {
		t.Errorf("usage of the other entity: %+v", got)
	}
	byResource, err := s.ListUsage(ctx, ns, store.UsageQuery{Resource: "api", Window: store.Daily, From: 0, To: t0h + 86_400_000})
	if err != nil || len(byResource) != 1 || byResource[0].Key.Entity != "other" {
		t.Errorf("usage of api by day: %+v, %v; want other's only", byResource, err)
	}
}

// A purge leaves no key of the namespace and no index entry of its API
// keys, on a single server and on a Cluster.
func TestPurgeLeavesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		url  *string
	}{{"Server", &serverURL}, {"Cluster", &clusterURL}} {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t, *c.url)
			raw := rawClient(t, *c.url)
			ctx, id := context.Background(), randomID(t)
			n := model.Namespace{Name: "name-" + id, ID: id, CreatedAt: time.UnixMilli(0).UTC()}
			if err := s.CreateNamespace(ctx, n); err != nil {
				t.Fatal(err)
			}
			_, hash := model.GenerateKey()
			ev := func(i string) model.AuditEvent { return model.AuditEvent{ID: "01" + i, Entity: "e"} }
			steps := []error{
				s.CreateEntity(ctx, id, model.Entity{ID: "e"}, ev("1")),
				s.CreateEntity(ctx, id, model.Entity{ID: "c", ParentID: "e"}, ev("2")),
				s.PutConfig(ctx, id, model.EntityScope("e", "api"), model.Config{}, ev("3")),
				s.CreateKey(ctx, id, model.Key{Name: "k", Hash: hash, Role: model.RoleRead}, model.AuditEvent{ID: "014"}),
				s.AddUsage(ctx, id, []store.UsageIncrement{{Key: store.UsageKey{Entity: "e", Resource: "api", Window: store.Hourly, Start: t0h}, Expires: 1}}),
				s.SetNamespaceDeleted(ctx, n.Name, time.UnixMilli(1)),
			}
			if err := errors.Join(steps...); err != nil {
				t.Fatal(err)
			}
			last := 0
			if err := s.PurgeNamespace(ctx, n.Name, func(d int) { last = d }); err != nil {
				t.Fatal(err)
			}
			if last < 10 {
				t.Errorf("progress reported %d deleted", last)
			}
			if left := keysMatching(t, raw, "tg:{"+id+"}:*"); len(left) != 0 {
				t.Errorf("keys left: %v", left)
			}
			if _, err := s.KeyByHash(ctx, hash); !errors.Is(err, model.ErrKeyNotFound) {
				t.Errorf("KeyByHash after the purge = %v", err)
			}
			// The name and the id are free again.
			if err := s.CreateNamespace(ctx, n); err != nil {
				t.Errorf("registering the purged namespace again: %v", err)
			}
		})
	}
}

func rawClient(t testing.TB, url string) rueidis.Client {
	t.Helper()
	if url == "" {
		t.Skip(redislocal.Help)
	}
	co, err := redis.ClientOption(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// keysMatching scans every node for the keys that match pattern.
func keysMatching(t *testing.T, c rueidis.Client, pattern string) []string {
	t.Helper()
	var out []string
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(context.Background(), node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out
}

// AddUsage deletes the snapshots whose time came, with their index
// entries (the time is made to come here by rewriting its score).
func TestUsageSweep(t *testing.T) {
	s, raw, ns, ctx := newStore(t), rawClient(t, serverURL), randomID(t), context.Background()
	add := func(entity string) {
		t.Helper()
		k := store.UsageKey{Entity: entity, Resource: "api", Window: store.Hourly, Start: t0h}
		if err := s.AddUsage(ctx, ns, []store.UsageIncrement{{Key: k, Source: "s", Seq: "1", Expires: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	add("old")
	id := "hour|old|api|" + fmt.Sprintf("%020d", t0h)
	if err := raw.Do(ctx, raw.B().Zadd().Key("tg:{"+ns+"}:ux").ScoreMember().ScoreMember(1, id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	add("new")
	if got := usageOf(t, s, ns, "old"); len(got) != 0 {
		t.Errorf("swept snapshot listed: %+v", got)
	}
	if got := usageOf(t, s, ns, "new"); len(got) != 1 {
		t.Errorf("new snapshot: %+v", got)
	}
	left := keysMatching(t, raw, "tg:{"+ns+"}:*")
	slices.Sort(left)
	want := []string{"tg:{" + ns + "}:u:hour|new|api|" + fmt.Sprintf("%020d", t0h), "tg:{" + ns + "}:ue:hour|new",
		"tg:{" + ns + "}:ur:hour|api", "tg:{" + ns + "}:ux"}
	if !slices.Equal(left, want) {
		t.Errorf("keys after the sweep:\n%q\nwant\n%q", left, want)
	}
	// Everything expires with the snapshot: no sooner than an hour after
	// its write (its own expiry passed long ago).
	for _, k := range want {
		ttl, err := raw.Do(ctx, raw.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil || ttl < int64(59*time.Minute/time.Millisecond) || ttl > int64(time.Hour/time.Millisecond) {
			t.Errorf("PTTL %s = %d ms, %v; want about an hour", k, ttl, err)
		}
	}
	members, err := raw.Do(ctx, raw.B().Zrange().Key("tg:{"+ns+"}:ur:hour|api").Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(members) != 1 {
		t.Errorf("resource index after the sweep: %v, %v", members, err)
	}
}
