package rls

import (
	"context"
	"errors"
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/calendar"
)

type descriptorStatus = pb.RateLimitResponse_DescriptorStatus

// charge acquires hits tokens of every limit of r for entity and commits at
// once. A denial is an OVER_LIMIT status, not an error; so is a hits count
// larger than a limit's capacity, which no wait could grant.
func charge(ctx context.Context, lim *tollgate.Limiter, r *rule, entity string, hits uint64) (*descriptorStatus, error) {
	n := int64(hits) // bounded by maxHits <= MaxTokens
	if l, ok := r.tooSmall(n); ok {
		return overCapacity(r.envoyLimit(l.Name, l.Capacity)), nil
	}
	consume := make(tollgate.Consume, len(r.names))
	for _, name := range r.names {
		consume[name] = n
	}
	lease, err := lim.Acquire(ctx, entity, r.resource, consume, r.opts...)
	if err == nil {
		return granted(ctx, r, lease)
	}
	var ex *tollgate.RateLimitExceeded
	if errors.As(err, &ex) {
		return denied(r, ex), nil
	}
	if st := storedOverCapacity(ctx, lim, r, entity, n, err); st != nil {
		return st, nil
	}
	return nil, err
}

// tooSmall returns an explicit limit whose capacity is below n.
func (r *rule) tooSmall(n int64) (tollgate.Limit, bool) {
	for _, l := range r.limits {
		if l.Capacity < n {
			return l, true
		}
	}
	return tollgate.Limit{}, false
}

// storedOverCapacity recognises, after Acquire refused a charge with stored
// limits as invalid, the case of an amount above a stored limit's capacity
// (the limiter's way of saying it can never be granted), and answers it
// OVER_LIMIT. Any other case returns nil and the error stands.
func storedOverCapacity(ctx context.Context, lim *tollgate.Limiter, r *rule, entity string, n int64, err error) *descriptorStatus {
	var ve *tollgate.ValidationError
	if r.limits != nil || !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "consume.") {
		return nil
	}
	statuses, aerr := lim.Available(ctx, entity, r.resource)
	if aerr != nil {
		return nil
	}
	for _, st := range statuses {
		if st.Capacity < n && r.charges(st.Limit) {
			return overCapacity(r.envoyLimit(st.Limit, st.Capacity))
		}
	}
	return nil
}

func (r *rule) charges(name string) bool {
	for _, n := range r.names {
		if n == name {
			return true
		}
	}
	return false
}

// granted reads the lease's statuses, commits it and reports OK with the
// tightest limit. A degraded lease (store down, Allow mode) has no statuses.
func granted(ctx context.Context, r *rule, lease *tollgate.Lease) (*descriptorStatus, error) {
	statuses := lease.Statuses()
	// The charge is written; finish it even if the caller has gone.
	if err := lease.Commit(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	st := &descriptorStatus{Code: pb.RateLimitResponse_OK}
	if t, ok := tightest(statuses); ok {
		st.CurrentLimit = r.envoyLimit(t.Limit, t.Capacity)
		st.LimitRemaining = clamp32(t.Available)
	} else if len(r.limits) > 0 {
		st.CurrentLimit = envoyLimit(r.limits[0])
	}
	return st, nil
}

// denied reports a denial: the limit that decides when to retry, the
// smallest balance, and the exact time until the same request could pass.
func denied(r *rule, ex *tollgate.RateLimitExceeded) *descriptorStatus {
	st := &descriptorStatus{
		Code:               pb.RateLimitResponse_OVER_LIMIT,
		DurationUntilReset: durationpb.New(ex.RetryAfter),
	}
	if p := ex.Primary(); p.Limit != "" {
		st.CurrentLimit = r.envoyLimit(p.Limit, p.Capacity)
	}
	if t, ok := tightest(ex.Statuses); ok {
		st.LimitRemaining = clamp32(t.Available)
	}
	return st
}

// overCapacity reports a charge larger than a limit's capacity: over the
// limit for good, so no duration until reset.
func overCapacity(limit *pb.RateLimitResponse_RateLimit) *descriptorStatus {
	return &descriptorStatus{Code: pb.RateLimitResponse_OVER_LIMIT, CurrentLimit: limit}
}

// tightest returns the status with the smallest balance.
func tightest(statuses []tollgate.Status) (tollgate.Status, bool) {
	if len(statuses) == 0 {
		return tollgate.Status{}, false
	}
	t := statuses[0]
	for _, s := range statuses[1:] {
		// a limit in shadow is the tightest only when every one is
		if t.Shadow && !s.Shadow || s.Shadow == t.Shadow && s.Available < t.Available {
			t = s
		}
	}
	return t, true
}

// envoyLimit describes the limit named name: exactly when the rule has it
// explicitly, else (stored limits, whose refill rate the status does not
// carry) as its capacity with an unknown unit.
func (r *rule) envoyLimit(name string, capacity int64) *pb.RateLimitResponse_RateLimit {
	for _, l := range r.limits {
		if l.Name == name {
			return envoyLimit(l)
		}
	}
	return &pb.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: clamp32(capacity)}
}

// envoyLimit expresses a Tollgate rate limit as requests per unit: the
// refill amount per refill period, in the largest unit (day, hour, minute,
// second) that divides the period, with a multiplier. A period that is not
// a whole number of seconds is scaled up until it is, so 4 per 250ms reads
// 16 per second and 1 per 1500ms 2 per 3 seconds. The burst (capacity) has
// no Envoy field. Figures beyond uint32 saturate.
func envoyLimit(l tollgate.Limit) *pb.RateLimitResponse_RateLimit {
	out := &pb.RateLimitResponse_RateLimit{Name: l.Name}
	if u, ok := calendarUnits[l.Window.Unit]; ok {
		out.RequestsPerUnit, out.Unit = clamp32(l.RefillAmount), u
		return out
	}
	ms := l.RefillPeriod.Milliseconds()
	if l.Kind != tollgate.Rate || ms <= 0 {
		out.RequestsPerUnit = clamp32(l.Capacity)
		return out
	}
	amount := l.RefillAmount
	if ms%1000 != 0 {
		// amount <= MaxTokens (< 2^53) and ms <= 2^45, k <= 1000: no overflow.
		k := 1000 / gcd(ms, 1000)
		amount, ms = amount*k, ms*k
	}
	unit, mult := envoyUnit(ms / 1000)
	out.RequestsPerUnit, out.Unit = clamp32(amount), unit
	if mult != 1 {
		out.UnitMultiplier = wrapperspb.UInt32(clamp32(mult))
	}
	return out
}

var envoyUnits = []struct {
	seconds int64
	unit    pb.RateLimitResponse_RateLimit_Unit
}{
	{86400, pb.RateLimitResponse_RateLimit_DAY},
	{3600, pb.RateLimitResponse_RateLimit_HOUR},
	{60, pb.RateLimitResponse_RateLimit_MINUTE},
	{1, pb.RateLimitResponse_RateLimit_SECOND},
}

// calendarUnits are Envoy's units of a calendar quota's windows (the
// zone has no field).
var calendarUnits = map[calendar.Unit]pb.RateLimitResponse_RateLimit_Unit{
	calendar.Hour:  pb.RateLimitResponse_RateLimit_HOUR,
	calendar.Day:   pb.RateLimitResponse_RateLimit_DAY,
	calendar.Week:  pb.RateLimitResponse_RateLimit_WEEK,
	calendar.Month: pb.RateLimitResponse_RateLimit_MONTH,
}

// envoyUnit returns the largest unit that divides a period of secs seconds
// (secs > 0) and how many of it make the period.
func envoyUnit(secs int64) (pb.RateLimitResponse_RateLimit_Unit, int64) {
	for _, u := range envoyUnits {
		if secs%u.seconds == 0 {
			return u.unit, secs / u.seconds
		}
	}
	return pb.RateLimitResponse_RateLimit_SECOND, secs
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
