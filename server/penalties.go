package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Penalties and their undoing: POST /v1/penalize and
// /v1/leases/{id}/penalize empty limits until a time (a vendor's 429);
// POST /v1/reset refills them (an operator's undo).

// penalize empties limits of an entity and resource until a time: 204.
func (s *Server) penalize(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.PenalizeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := c.checkEntity(r.Context(), req.Entity); err != nil {
		return err
	}
	until, err := s.penaltyEnd(&req.Penalty)
	if err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, lim.Penalize(r.Context(), req.Entity, req.Resource, until, req.Reason, req.Limits, c.writeOpts()...))
}

// penalizeLease penalizes the lease's entity and resource, the limits
// looked up among those it was acquired with: 204. A degraded lease knows
// neither; its caller penalizes with POST /v1/penalize instead.
func (s *Server) penalizeLease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Penalty
	if err := decode(w, r, &req); err != nil {
		return err
	}
	until, err := s.penaltyEnd(&req)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if isDegradedID(id) {
		return model.Invalid("lease_id", id, "a degraded lease knows no entity or resource: penalize with POST /v1/penalize")
	}
	le, err := s.resume(r.Context(), c, id)
	if err != nil {
		return err
	}
	return noContent(w, le.Penalize(r.Context(), until, req.Reason, req.Limits, c.writeOpts()...))
}

// penaltyEnd reads when a penalty ends: exactly one of until_ms and
// retry_after_ms, after now and at most tollgate.MaxPenalty ahead. The
// limits are bounded as a request's limits are; the library checks the
// rest (each name in effect and refilling, the reason's length).
func (s *Server) penaltyEnd(p *api.Penalty) (time.Time, error) {
	now := s.clock.Now()
	maxMS := tollgate.MaxPenalty.Milliseconds()
	var until time.Time
	switch {
	case p.UntilMS != 0 && p.RetryAfterMS != 0:
		return time.Time{}, model.Invalid("retry_after_ms", strconv.FormatInt(p.RetryAfterMS, 10), "give until_ms or retry_after_ms, not both")
	case p.RetryAfterMS != 0:
		if p.RetryAfterMS < 1 || p.RetryAfterMS > maxMS {
			return time.Time{}, model.Invalid("retry_after_ms", strconv.FormatInt(p.RetryAfterMS, 10), "want 1 to "+strconv.FormatInt(maxMS, 10))
		}
		until = now.Add(time.Duration(p.RetryAfterMS) * time.Millisecond)
	case p.UntilMS != 0:
		if p.UntilMS <= now.UnixMilli() || p.UntilMS > now.UnixMilli()+maxMS {
			return time.Time{}, model.Invalid("until_ms", strconv.FormatInt(p.UntilMS, 10),
				"want after now ("+strconv.FormatInt(now.UnixMilli(), 10)+") and at most "+tollgate.MaxPenalty.String()+" ahead")
		}
		until = time.UnixMilli(p.UntilMS)
	default:
		return time.Time{}, model.Invalid("until_ms", "", "give until_ms or retry_after_ms: when the penalty ends")
	}
	if len(p.Limits) > api.MaxLimits {
		return time.Time{}, model.Invalid("limits", "", "more than "+strconv.Itoa(api.MaxLimits)+" limits")
	}
	return until, nil
}

// reset refills limits of an entity's bucket for a resource, lifting a
// penalty: 204. An admin's call, audited as limit.reset.
func (s *Server) reset(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ResetRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := c.checkEntity(r.Context(), req.Entity); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, adm.Reset(r.Context(), req.Entity, req.Resource, req.Reason, req.Limits, c.writeOpts()...))
}
