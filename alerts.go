package tollgate

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// An Alert says that an entity's use of a limit (the share of its capacity
// taken, as LimitDecisions counts it) crossed one of the thresholds its
// configuration sets (model.Config.AlertAt) upward.
type Alert struct {
	Namespace string
	Entity    string
	Resource  string
	Limit     string
	// Threshold is the one crossed; Use the use that crossed it (above 1
	// for a refusal: the amount asked for is counted).
	Threshold float64
	Use       float64
	// At is the time of the decision.
	At time.Time
}

// AlertRearm is the fraction of a threshold below which an entity's use
// must fall before the threshold alerts again: a band, so that a tenant
// running at its limit, whose use goes up and down by a refill at each
// call, is alerted once rather than at every refill.
const AlertRearm = 0.9

// MaxAlertStates bounds the entity, resource and limit triples whose
// alerts a limiter remembers as fired: those whose use is at or above a
// threshold (less the band). They are kept in alertShards shards by
// entity, each holding at most its share; beyond it, one of the shard's
// at random is forgotten to make room, and its thresholds alert again if
// still crossed, so at worst a triple alerts twice for one crossing.
const MaxAlertStates = 10_000

// alertShards splits the alert states, each shard with its own lock: a
// decision of a limit with thresholds takes its entity's shard's lock
// when the use is near a threshold or the shard holds fired states.
const alertShards = 16

// WithAlerts calls fn with an Alert whenever a decision of the limiter
// takes an entity's use of a limit across one of its configuration's
// alert thresholds (model.Config.AlertAt) upward: once per crossing, per
// threshold, until the use falls below AlertRearm of it. fn is called on
// the acquiring goroutine, after the decision: it must not block (queue
// the alert, as the server's webhook does). Each limiter sees its own
// decisions only: limiters in several processes each alert for the
// crossings they see.
func WithAlerts(fn func(Alert)) Option { return func(o *options) { o.alertFn = fn } }

// alertKey names an entity's limit of a resource.
type alertKey struct{ entity, resource, limit string }

// alertTracker remembers the thresholds fired, and not re-armed, per
// entity, resource and limit.
type alertTracker struct{ shards [alertShards]alertShard }

type alertShard struct {
	n     atomic.Int64 // entries of fired, read without the lock
	mu    sync.Mutex
	fired map[alertKey][model.MaxAlertAt]float64
	_     [64]byte // a cache line apart from the next shard's lock
}

// shard returns entity's shard (FNV-1a of its id: no seed to make, and a
// skewed spread only costs contention).
func (t *alertTracker) shard(entity string) *alertShard {
	h := uint32(2166136261)
	for i := 0; i < len(entity); i++ {
		h = (h ^ uint32(entity[i])) * 16777619
	}
	return &t.shards[h%alertShards]
}

// observe notes use of an entity's limit whose thresholds are at (ascending,
// zero beyond the last), and sends the alerts of the thresholds crossed
// upward, outside the lock.
func (t *alertTracker) observe(l *Limiter, entity, resource, limit string, at *[model.MaxAlertAt]float64, use float64, now int64) {
	sh := t.shard(entity)
	if use < at[0]*AlertRearm && sh.n.Load() == 0 {
		return // below every threshold's band, and nothing fired in the shard
	}
	var send [model.MaxAlertAt]float64
	sent := 0
	k := alertKey{entity, resource, limit}
	sh.mu.Lock()
	cur, had := sh.fired[k]
	var next [model.MaxAlertAt]float64
	kept := 0
	for _, th := range at {
		if th == 0 {
			break
		}
		was := had && slices.Contains(cur[:], th)
		switch {
		case was && use >= th*AlertRearm:
			next[kept], kept = th, kept+1
		case !was && use >= th:
			next[kept], kept = th, kept+1
			send[sent], sent = th, sent+1
		}
	}
	switch {
	case kept == 0 && had:
		delete(sh.fired, k)
		sh.n.Add(-1)
	case kept > 0:
		if !had {
			if sh.fired == nil {
				sh.fired = make(map[alertKey][model.MaxAlertAt]float64)
			}
			if len(sh.fired) >= MaxAlertStates/alertShards {
				for other := range sh.fired { // map order: one at random
					delete(sh.fired, other)
					sh.n.Add(-1)
					break
				}
			}
			sh.n.Add(1)
		}
		sh.fired[k] = next
	}
	sh.mu.Unlock()
	for _, th := range send[:sent] {
		l.alertFn(Alert{Namespace: l.ns, Entity: entity, Resource: resource, Limit: limit,
			Threshold: th, Use: use, At: time.UnixMilli(now).UTC()})
	}
}

// alertThresholds is cfg's AlertAt as plan carries it: without a pointer,
// zero beyond the last.
func alertThresholds(cfg *model.Config) (out [model.MaxAlertAt]float64) {
	copy(out[:], cfg.AlertAt)
	return out
}
