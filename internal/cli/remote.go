package cli

import (
	"context"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
)

// remote is a backend served by a Tollgate server, through the client.
type remote struct {
	*client.Client
}

func (g *globals) openRemote() (backend, error) {
	opts := []client.Option{client.WithNamespace(g.namespace), client.WithPrincipal(principal()), client.WithTimeout(g.timeout)}
	if g.apiKey != "" {
		opts = append(opts, client.WithAPIKey(g.apiKey))
	}
	c, err := client.New(g.server, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return remote{c}, nil
}

func limitOpts(limits []tollgate.Limit) []client.AcquireOption {
	if len(limits) == 0 {
		return nil
	}
	return []client.AcquireOption{client.WithLimits(limits...)}
}

func (r remote) AcquireCommit(ctx context.Context, entity, resource string, consume tollgate.Consume, limits []tollgate.Limit) ([]tollgate.Status, error) {
	g, err := r.AcquireAndCommit(ctx, entity, resource, consume, limitOpts(limits)...)
	return g.Statuses, err
}

func (r remote) Available(ctx context.Context, entity, resource string, limits []tollgate.Limit) ([]tollgate.Status, error) {
	return r.Client.Available(ctx, entity, resource, limitOpts(limits)...)
}

func (r remote) Reserve(ctx context.Context, entity, resource, id string, consume tollgate.Consume, limits []tollgate.Limit, expiry time.Duration) (tollgate.Reservation, error) {
	opts := limitOpts(limits)
	if expiry != 0 {
		opts = append(opts, client.WithLeaseTTL(expiry))
	}
	res, err := r.Client.Reserve(ctx, entity, resource, id, consume, opts...)
	return res.Reservation, err
}

func (r remote) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	n, err := r.Client.PurgeNamespace(ctx, name)
	progress(n)
	return err
}

func (r remote) Close() error { return nil }
