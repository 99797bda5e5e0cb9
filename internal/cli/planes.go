package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// acquirer is the part of the data plane (model.Acquirer) the operator
// commands use: a command-line process holds no lease.
type acquirer interface {
	AcquireAndCommit(ctx context.Context, entity, resource string, consume model.Consume, opts ...model.AcquireOption) (model.Grant, error)
	Available(ctx context.Context, entity, resource string, opts ...model.AcquireOption) ([]model.Status, error)
	Reserve(ctx context.Context, entity, resource, id string, consume model.Consume, opts ...model.AcquireOption) (model.ReservationGrant, error)
	Release(ctx context.Context, id string, opts ...model.WriteOption) error
	Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string, opts ...model.WriteOption) error
}

var (
	_ acquirer = (*tollgate.Limiter)(nil)
	_ acquirer = (*client.Client)(nil)
)

// planes are what an operator command works through, one namespace's
// data plane and control plane: a limiter and an admin over a store
// (--store), in this process, or a server's (--server) through the Go
// client, which is both.
type planes struct {
	lim acquirer
	adm model.Administrator
	// who names the operator as the principal of every change.
	who []model.WriteOption
	// store is the store under a local limiter, for what only some
	// stores tell (whether an aggregator runs on a DynamoDB table); nil
	// through a server.
	store store.Store
	close func() error
}

// withPlanes runs f against the planes the global flags name.
func (g *globals) withPlanes(cmd *cobra.Command, f func(ctx context.Context, p *planes) error) error {
	ctx := cmd.Context()
	p, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer p.close()
	return f(ctx, p)
}

// open returns the planes the global flags name.
func (g *globals) open(ctx context.Context) (*planes, error) {
	who := []model.WriteOption{model.WithPrincipal(principal())}
	if g.server != "" {
		c, err := g.client()
		if err != nil {
			return nil, err
		}
		return &planes{lim: c, adm: c, who: who, close: func() error { return nil }}, nil
	}
	st, closeStore, err := g.openStore(ctx, true)
	if err != nil {
		return nil, err
	}
	// Acquires made here count in usage like the server's: recorded, and
	// written when the command ends.
	retention, err := envRetention()
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	base := st
	st, stopRecording := recordUsage(st, g.log, retention)
	opts := []tollgate.Option{tollgate.WithNamespace(g.namespace)}
	lim, err := tollgate.New(st, opts...)
	var adm *tollgate.Admin
	if err == nil {
		adm, err = tollgate.NewAdmin(st, opts...)
	}
	if err != nil {
		stopRecording()
		_ = closeStore()
		return nil, err
	}
	closeAll := func() error { stopRecording(); return closeStore() }
	return &planes{lim: lim, adm: adm, who: who, store: base, close: closeAll}, nil
}

// client returns the Go client of the server the global flags name.
func (g *globals) client() (*client.Client, error) {
	opts := []client.Option{client.WithNamespace(g.namespace), client.WithPrincipal(principal()), client.WithTimeout(g.timeout)}
	if g.apiKey != "" {
		opts = append(opts, client.WithAPIKey(g.apiKey))
	}
	c, err := client.New(g.server, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// withLimits is the option of a command's --limits, if it names any.
func withLimits(limits []tollgate.Limit) []model.AcquireOption {
	if len(limits) == 0 {
		return nil
	}
	return []model.AcquireOption{model.WithLimits(limits...)}
}
