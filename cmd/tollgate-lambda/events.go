package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// eventsHandler is the function in events mode: an EventBridge rule hands
// it infrastructure events one at a time, or an SQS queue (the rule's
// target) in batches, and it releases the reservations they name (package
// events).
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

// eventsResponse is what an invocation with events returns, unless they
// came in an SQS batch (sqsResponse).
type eventsResponse struct {
	// Outcome, Rule and ID are the event's, when the invocation held one
	// (an EventBridge rule's).
	Outcome string `json:"outcome,omitempty"`
	Rule    string `json:"rule,omitempty"`
	ID      string `json:"id,omitempty"`
	// Results are each event's, when it held several (an array).
	Results []eventResult `json:"results,omitempty"`
}

// eventResult is the outcome of one event of several.
type eventResult struct {
	Outcome string `json:"outcome"`
	Rule    string `json:"rule,omitempty"`
	ID      string `json:"id,omitempty"`
}

func resultOf(r events.Result) eventResult {
	return eventResult{Outcome: r.Outcome.String(), Rule: r.Rule, ID: r.ID}
}

// handle decides the events of one invocation: what an EventBridge rule
// hands (an event), what an SQS event source mapping hands (a batch of
// messages whose bodies are events), or any other shape package events
// reads. Only a release the store failed is an error, so that the event
// is handed again; a malformed or unmatched event, or an id holding no
// reservation, succeeds: handing it again could not change the answer.
//
// For an SQS batch the failures are reported per message, in the partial
// batch response (batchItemFailures), so that SQS hands again only the
// messages whose release failed; that needs ReportBatchItemFailures in the
// event source mapping's FunctionResponseTypes (docs/aggregator.md). A
// failed release of a record without a message id fails the whole batch,
// which is safe: releases repeat harmlessly (not_found).
func (h *eventsHandler) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	results := h.p.HandleValue(ctx, raw)
	if fromSQS(results) {
		return sqsResponse(results)
	}
	var resp eventsResponse
	if len(results) == 1 {
		r := resultOf(results[0])
		resp.Outcome, resp.Rule, resp.ID = r.Outcome, r.Rule, r.ID
	} else {
		for _, r := range results {
			resp.Results = append(resp.Results, resultOf(r))
		}
	}
	return resp, firstFailure(results)
}

// fromSQS reports whether the events came in SQS messages.
func fromSQS(results []events.Result) bool {
	return slices.ContainsFunc(results, func(r events.Result) bool { return r.MessageID != "" })
}

// sqsResponse is the partial batch response naming the messages whose
// release failed, once each.
func sqsResponse(results []events.Result) (lambdaevents.SQSEventResponse, error) {
	resp := lambdaevents.SQSEventResponse{BatchItemFailures: []lambdaevents.SQSBatchItemFailure{}}
	seen := map[string]bool{}
	for _, r := range results {
		if r.Outcome != events.Failed {
			continue
		}
		if r.MessageID == "" {
			return resp, r.Err
		}
		if !seen[r.MessageID] {
			seen[r.MessageID] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: r.MessageID})
		}
	}
	return resp, nil
}

// firstFailure is the error of the first failed release, if any.
func firstFailure(results []events.Result) error {
	for _, r := range results {
		if r.Outcome == events.Failed {
			return r.Err
		}
	}
	return nil
}
