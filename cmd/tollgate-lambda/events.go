package main

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// eventsHandler is the function in events mode: an EventBridge rule hands
// it infrastructure events one at a time, and it releases the reservations
// they name (package events).
type eventsHandler struct {
	p *events.Processor
}

func newEventsHandler(st store.Store, cfg config, log *slog.Logger) (*eventsHandler, error) {
	lim, err := tollgate.New(st, tollgate.WithNamespace(cfg.namespace))
	if err != nil {
		return nil, err
	}
	p, err := events.NewProcessor(cfg.rules, lambdaReleaser{lim}, log)
	if err != nil {
		return nil, err
	}
	return &eventsHandler{p: p}, nil
}

// lambdaReleaser releases as the function: the audit event of each
// release names it as the principal, as the reconciler's expiries do, with
// the rule and event the processor passes.
type lambdaReleaser struct{ lim *tollgate.Limiter }

// principal is the function's in audit events.
const principal = "tollgate-lambda"

func (r lambdaReleaser) Release(ctx context.Context, id string, opts ...model.WriteOption) error {
	return r.lim.Release(ctx, id, append([]model.WriteOption{tollgate.WithPrincipal(principal)}, opts...)...)
}

// eventsResponse is what an events invocation returns.
type eventsResponse struct {
	Outcome string `json:"outcome"`
	Rule    string `json:"rule,omitempty"`
	ID      string `json:"id,omitempty"`
}

// handle decides one event. Only a release the store failed is an error,
// so that EventBridge (or Lambda's asynchronous retries) hands the event
// again; a malformed or unmatched event, or an id holding no reservation,
// succeeds: handing it again could not change the answer.
func (h *eventsHandler) handle(ctx context.Context, raw json.RawMessage) (eventsResponse, error) {
	res := h.p.Handle(ctx, raw)
	resp := eventsResponse{Outcome: res.Outcome.String(), Rule: res.Rule, ID: res.ID}
	if res.Outcome == events.Failed {
		return resp, res.Err
	}
	return resp, nil
}
