package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/memory"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// storeSpec is a parsed store URL.
type storeSpec struct {
	kind     string // "embedded", "memory", "dynamodb" or "redis"
	path     string // embedded
	url      string // redis
	table    string // dynamodb
	region   string
	endpoint string
}

// parseStoreURL reads embedded:PATH, memory:,
// dynamodb://TABLE?region=R&endpoint=URL, or a Redis URL (redis://,
// rediss://, redis+cluster://, rediss+cluster://: store/redis.Open).
func parseStoreURL(raw string) (storeSpec, error) {
	switch {
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"),
		strings.HasPrefix(raw, "redis+cluster://"), strings.HasPrefix(raw, "rediss+cluster://"):
		if _, err := redis.ClientOption(raw); err != nil {
			return storeSpec{}, usagef("%v", err)
		}
		return storeSpec{kind: "redis", url: raw}, nil
	case raw == "memory:" || raw == "memory":
		return storeSpec{kind: "memory"}, nil
	case strings.HasPrefix(raw, "embedded:"):
		p := strings.TrimPrefix(raw, "embedded:")
		if p == "" {
			return storeSpec{}, usagef("store %q: embedded needs a file path, e.g. embedded:tollgate.db", raw)
		}
		return storeSpec{kind: "embedded", path: p}, nil
	case strings.HasPrefix(raw, "dynamodb://"):
		u, err := url.Parse(raw)
		if err != nil {
			return storeSpec{}, usagef("store %q: %v", raw, err)
		}
		if u.Host == "" {
			return storeSpec{}, usagef("store %q: dynamodb needs a table name, e.g. dynamodb://tollgate?region=eu-west-1", raw)
		}
		q := u.Query()
		for k := range q {
			if k != "region" && k != "endpoint" {
				return storeSpec{}, usagef("store %q: unknown parameter %q (want region, endpoint)", raw, k)
			}
		}
		return storeSpec{kind: "dynamodb", table: u.Host, region: q.Get("region"), endpoint: q.Get("endpoint")}, nil
	}
	return storeSpec{}, usagef("store %q: want embedded:PATH, memory:, dynamodb://TABLE or redis://HOST:PORT", raw)
}

// openStore opens the store named by --store (DefaultStore if empty). For
// DynamoDB it checks the table and its schema unless check is false (the
// table commands manage the table themselves), and bounds each call by
// --store-timeout.
func (g *globals) openStore(ctx context.Context, check bool) (store.Store, func() error, error) {
	raw := g.store
	if raw == "" {
		raw = DefaultStore
	}
	spec, err := parseStoreURL(raw)
	if err != nil {
		return nil, nil, err
	}
	switch spec.kind {
	case "memory":
		return memory.New(), func() error { return nil }, nil
	case "embedded":
		st, err := embedded.Open(spec.path)
		if errors.Is(err, embedded.ErrLocked) {
			return nil, nil, fmt.Errorf("open %s: %w (a running tollgate serve holds it: use --server URL)", spec.path, err)
		}
		if errors.Is(err, embedded.ErrDamaged) {
			return nil, nil, fmt.Errorf("%w (every problem: tollgate store check --store %s)", err, raw)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", spec.path, err)
		}
		return st, st.Close, nil
	case "redis":
		if g.storeTimeout < 0 {
			return nil, nil, usagef("--store-timeout %v: want a positive duration, or 0 for no limit", g.storeTimeout)
		}
		st, err := redis.Open(ctx, spec.url, redis.WithCallTimeout(g.storeTimeout))
		if err != nil {
			return nil, nil, err
		}
		return st, st.Close, nil
	}
	st, err := openDynamoDB(ctx, spec, g.storeTimeout)
	if err != nil {
		return nil, nil, err
	}
	if check {
		if err := st.Admin().CheckTable(ctx); err != nil {
			if errors.Is(err, dynamodb.ErrTableNotFound) {
				return nil, nil, fmt.Errorf("%w (create it with: tollgate deploy --store %s)", err, raw)
			}
			return nil, nil, err
		}
	}
	return st, func() error { return nil }, nil
}

// openDynamoDB connects to the table of spec, each call bounded by
// timeout (dynamodb.WithCallTimeout). An endpoint on this machine
// (DynamoDB Local) needs no AWS credentials: dynamodb.Connect uses local
// ones when none are configured.
func openDynamoDB(ctx context.Context, spec storeSpec, timeout time.Duration) (*dynamodb.Store, error) {
	if timeout < 0 {
		return nil, usagef("--store-timeout %v: want a positive duration, or 0 for no limit", timeout)
	}
	return dynamodb.Connect(ctx, dynamodb.ConnectConfig{Table: spec.table, Region: spec.region, Endpoint: spec.endpoint},
		dynamodb.WithCallTimeout(timeout))
}
