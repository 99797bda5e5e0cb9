// Package store is the contract between the limiter and the backends that hold
// its state (memory, embedded, DynamoDB).
//
// The limiter decides policy (which limits apply, cascade, leases, failure
// modes) and hands a backend complete, validated requests; the backend applies
// each request atomically in its native way (a mutex, a transaction, a
// conditional write) using the shared arithmetic in package bucket and the
// helpers in this package, so no backend re-implements the math.
//
// Every method takes a namespace id: backends keep namespaces strictly apart.
// Package storetest is the conformance suite of this contract, and package
// limitertest that of a limiter over it: every backend must pass both.
package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

// Store is everything the limiter needs from a backend.
type Store interface {
	Buckets
	Leases
	Configs
	Entities
	Audit
	Namespaces
	Keys
	Changes
}

// Buckets holds token-bucket state. One bucket exists per namespace, entity and
// resource; it holds the state of every limit applied to that pair.
type Buckets interface {
	// Consume applies req atomically: every bucket in it is brought up to
	// req.Now (see Prepare), and if every checked limit covers its amount, all
	// amounts are debited and Consume returns true. Otherwise nothing is
	// debited anywhere and it returns false. Either way each LimitRequest's
	// Observed is set. Missing buckets are created full.
	Consume(ctx context.Context, ns string, req *ConsumeRequest) (granted bool, err error)
	// ApplyDeltas adds each delta to its limit's balance unconditionally (a
	// positive amount consumes and may create debt; a negative one refunds).
	// Deltas for buckets or limits that do not exist are dropped. Backends may
	// apply deltas independently of each other.
	ApplyDeltas(ctx context.Context, ns string, deltas []Delta) error
	// ReadBuckets returns the stored record of each key, nil where none exists,
	// without refilling.
	ReadBuckets(ctx context.Context, ns string, keys []BucketKey) ([]*Record, error)
	// Penalize empties the checked limits of one bucket (every part of
	// it) until req.Until, for every process (see Penalize, the helper). A
	// missing bucket is created, as Consume creates it.
	Penalize(ctx context.Context, ns string, req *PenaltyRequest) error
	// Reset refills the checked limits of one bucket (every part of it)
	// to capacity and appends req.Event, in one atomic step (see Reset,
	// the helper). A missing bucket is full already: only the event is
	// written.
	Reset(ctx context.Context, ns string, req *ResetRequest) error
}

// A Precondition is what a change of a config or an entity requires of
// the one stored (optimistic locking): the backend checks it inside the
// atomic step of the change, and on a mismatch fails with an error
// matching model.ErrPreconditionFailed (model.VersionMismatch) and writes
// nothing, audit event included. A change without one is unconditional.
//
// Versions (model.Config.Version, model.Entity.Version) are kept by the
// backends: a record is created at version 1 and each change writes the
// next; a record stored before versions were kept reads as version 1.
type Precondition struct {
	// Version is the version the stored record must have; 0: no record
	// may be stored (a config's put that must create).
	Version int64
}

// IfVersion is the precondition that the stored record is at version v
// (0: that there is none).
func IfVersion(v int64) Precondition { return Precondition{Version: v} }

// CheckVersion returns model.VersionMismatch if pre (the first one, if
// any) requires another version than have, the stored record's (0: none
// is stored), and nil otherwise.
func CheckVersion(have int64, pre []Precondition) error {
	if len(pre) > 0 && pre[0].Version != have {
		return model.VersionMismatch(pre[0].Version, have)
	}
	return nil
}

// Expects reports whether pre holds a precondition.
func Expects(pre []Precondition) bool { return len(pre) > 0 }

// Configs holds stored limits at the four levels named by model.Scope.
type Configs interface {
	// GetConfigs returns the config stored at each scope, nil where none is.
	GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error)
	// PutConfig replaces the config at scope and appends ev to the audit log,
	// atomically. An entity scope needs the entity to exist, else it fails
	// with model.ErrEntityNotFound. The config stored is at the version
	// after the one it replaces (1 where none was); cfg.Version is
	// ignored. pre, if given, is checked against the config replaced
	// (Precondition).
	PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...Precondition) error
	// DeleteConfig removes the config at scope and appends ev, atomically. It
	// returns an error matching model.ErrNotFound if there is none, and
	// one matching model.ErrPreconditionFailed if pre (Precondition)
	// does not hold.
	DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...Precondition) error
	// ListConfigs returns up to limit (1 to MaxConfigPage) stored configs
	// whose scopes sort after *after (nil: from the first), in
	// model.CompareScopes order: the system config, the resources' by
	// resource, then each entity's by entity and resource (its default is
	// model.DefaultResource). A backend whose indexes are eventually
	// consistent may miss a config written a moment ago.
	ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error)
}

// Entities holds the entity tree.
type Entities interface {
	// CreateEntity stores e, at version 1, and appends ev, atomically. It fails with
	// model.ErrEntityExists if the id is taken and model.ErrEntityNotFound if
	// e.ParentID is set and does not exist.
	CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error
	// GetEntity returns the entity or an error matching model.ErrEntityNotFound.
	GetEntity(ctx context.Context, ns, id string) (model.Entity, error)
	// DeleteEntity removes the entity with its configs and buckets and appends
	// ev. It fails with model.ErrEntityNotFound if there is no such entity,
	// and with model.ErrPreconditionFailed if pre (Precondition) does not
	// hold. Children keep their ParentID; cascade stops at a missing parent.
	DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...Precondition) error
	// ListChildren returns the entities whose parent is id, sorted by id.
	ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error)
	// ListEntities returns up to limit (1 to MaxEntityPage) entities with
	// ids greater than after, sorted by id. A backend whose indexes are
	// eventually consistent may miss an entity created a moment ago.
	ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error)
	// UpdateEntity replaces the name, parent, cascade flag and metadata of
	// the entity e.ID (its CreatedAt stays) and appends ev, atomically, and
	// keeps the children index (ListChildren) right. It fails with
	// model.ErrEntityNotFound if the entity or a new parent does not
	// exist, and with a *model.ValidationError (field parent_id) if the
	// new parent is the entity or one of its descendants (CheckAncestry).
	// A parent left as it was is not checked: it may be one deleted since
	// (DeleteEntity leaves children their ParentID). The entity stored is
	// at the version after the one it replaces (e.Version is ignored);
	// pre, if given, is checked against the one replaced (Precondition),
	// before the parent: a mismatch is model.ErrPreconditionFailed.
	UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...Precondition) error
}

// Audit reads the audit log written by the mutating calls above.
type Audit interface {
	// ListAudit returns up to limit events of entity (empty: system and
	// resource config events) with ids greater than after, oldest first.
	ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error)
}

// Namespaces is the registry of namespace names and their opaque ids. The
// ids are what the other methods take as ns.
type Namespaces interface {
	// CreateNamespace registers n. It fails with model.ErrNamespaceExists if
	// the name is registered (deleted or not) or the id is taken.
	CreateNamespace(ctx context.Context, n model.Namespace) error
	// GetNamespace returns the namespace named name, or an error matching
	// model.ErrNamespaceNotFound.
	GetNamespace(ctx context.Context, name string) (model.Namespace, error)
	// ListNamespaces returns every registered namespace, deleted ones
	// included, sorted by name.
	ListNamespaces(ctx context.Context) ([]model.Namespace, error)
	// SetNamespaceDeleted soft-deletes the namespace (at is the deletion
	// time) or, with the zero time, recovers it. Its data is untouched.
	SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error
	// PurgeNamespace deletes every item of a soft-deleted namespace, then its
	// registration. It fails with model.ErrNamespaceNotFound if there is no
	// such namespace; the caller checks that it is deleted. progress, if not
	// nil, is called with the number of items deleted so far.
	PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error
}

// BucketKey names a bucket within a namespace.
type BucketKey struct {
	Entity   string
	Resource string
}

// ConsumeRequest is one all-or-nothing debit across one or more buckets (an
// entity and its cascade ancestors).
type ConsumeRequest struct {
	Now     int64 // Unix milliseconds
	Buckets []BucketRequest
	// Lease, if not nil, is a durable lease record (see Leases) that the
	// backend creates if and only if it grants, in the same atomic step as
	// the debit. If a record with its id exists, Consume debits nothing and
	// fails with an error matching model.ErrLeaseExists; with ReusedID,
	// a tombstone of its id counts as one too. A record with EndedAt set
	// is created as a tombstone: an acquire committed in the same step (a
	// lease without concurrency tokens has nothing to give back). A
	// backend may keep the record itself (the memory backends do, rather
	// than copy it on every durable acquire): the caller must not change
	// it, or anything it points to, once it is passed; a change is a new
	// record (UpdateLease).
	Lease *LeaseRecord
	// ReusedID says that Lease's id is not fresh but derived (from an
	// idempotency key), so that it may name a lease that has ended: the
	// backend then also refuses it while a tombstone of that id is kept
	// (not Gone at Now). Ids the limiter makes at random are never
	// reused, and need no such check (on DynamoDB it is one more item in
	// the transaction).
	ReusedID bool
	// Event, if not nil, is an audit event (a reservation's) that the
	// backend appends if and only if it grants, atomically with the
	// debit and the record: a refusal, and a Lease whose id exists,
	// write none. It is allowed only together with Lease
	// (CheckConsumeEvent): an acquire without a record has no ending
	// to audit, and the hot path carries none.
	Event *model.AuditEvent
}

// CheckConsumeEvent rejects a request whose Event comes without a Lease,
// as a *model.ValidationError, before anything is written.
func CheckConsumeEvent(req *ConsumeRequest) error {
	if req.Event != nil && req.Lease == nil {
		return model.Invalid("event", req.Event.Action, "an audit event is written only with a lease record")
	}
	return nil
}

// BucketRequest lists every limit in effect for one bucket.
type BucketRequest struct {
	Key    BucketKey
	Limits []LimitRequest
	// Placement is set by Consume for backends that keep a bucket in several
	// parts (a sharded DynamoDB bucket): which part a granted request was
	// debited from. The caller hands it back in the Deltas that adjust or
	// undo that debit, so they land where the debit did. Others leave it 0.
	Placement int
	// Entity is the bucket's entity as the caller knows it (nil: not
	// known), for backends that keep its parent and cascade flag with the
	// bucket (DynamoDB does, docs/dynamodb.md 4.6). It never affects the verdict.
	Entity *model.Entity
	// Estimated is set by Consume when the Observed states of this
	// bucket's limits are an estimate rather than its state at Now: a
	// bucket kept in several parts (a split DynamoDB bucket) reports the
	// parts it tried, scaled, and a part not tried may hold more. Left
	// false, Observed is the bucket's exact state, remainder included, at
	// Now (or at a later instant, when a writer's clock ran ahead), which
	// only refill raises until tokens are given back: the limiter's deny
	// cache relies on it.
	// Others leave it false; the caller resets it.
	Estimated bool
	// Hint is the backend's to keep between requests made with the same
	// BucketRequest, which a caller that recycles its requests hands back
	// as it was left: the memory backends keep the bucket's table entry
	// there, which spares the next request for the same key its lookup
	// (they check that it is still that key's entry). The caller never
	// reads or sets it; a fresh request has none.
	Hint any
}

// LimitRequest is one limit of a BucketRequest: its current parameters (which
// the bucket adopts), whether the request checks it, and how much it debits.
type LimitRequest struct {
	Name   string
	Params bucket.Params
	// Check makes the grant depend on this limit: the balance after refill
	// must be at least Amount. Unchecked limits are only refilled and
	// reconfigured.
	Check bool
	// Amount is the millitokens to debit (>= 0).
	Amount int64
	// Observed is set by Consume: the limit's state after refill and before
	// any debit.
	Observed bucket.State
	// Wait, when positive, is set by Consume for a refused checked limit
	// whose refill the backend can predict better than Observed does: the
	// milliseconds until a retry could be granted. A sharded bucket refills
	// each shard at a fraction of the rate, so Observed (the bucket-level
	// estimate) would promise the tokens too early.
	Wait int64
}

// Delta is an unconditional change to one limit's balance, in millitokens.
type Delta struct {
	Key    BucketKey
	Limit  string
	Amount int64 // positive consumes, negative refunds
	// Placement is the BucketRequest.Placement of the debit being adjusted.
	Placement int
	// Params are the limit's parameters as that debit saw them (zero: not
	// known). Backends that time the expiry of idle buckets use them to
	// tell how long a debt takes to refill.
	Params bucket.Params
}

// Record is a bucket as stored: when it was last refilled and each limit's
// parameters and state.
type Record struct {
	Refilled int64 // Unix milliseconds
	Limits   []LimitState
}

// LimitState is one limit inside a Record.
type LimitState struct {
	Name   string
	Params bucket.Params
	State  bucket.State
}

// Find returns the index of the named limit in b, or -1.
func (b *BucketRequest) Find(name string) int {
	for i := range b.Limits {
		if b.Limits[i].Name == name {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := &Record{Refilled: r.Refilled, Limits: make([]LimitState, len(r.Limits))}
	copy(c.Limits, r.Limits)
	return c
}

// Find returns the index of the named limit in r, or -1.
func (r *Record) Find(name string) int {
	for i := range r.Limits {
		if r.Limits[i].Name == name {
			return i
		}
	}
	return -1
}

// Prepare brings r up to now for br: it refills every limit in r under its
// stored parameters, adopts the parameters br carries (clamping balances, see
// bucket.Reconfigure), adds limits r lacks at full capacity, and stores each
// requested limit's resulting state in Observed. It reports whether every
// checked limit covers its amount. It never debits; see Debit.
//
// Time never runs backwards: if now is before r.Refilled, nothing refills.
func Prepare(r *Record, br *BucketRequest, now int64) bool {
	return prepare(r, br, now, nil)
}

// PrepareDebit is Prepare followed, if it returned true, by Debit, for a
// request of a single bucket: the debit finds each limit where Prepare
// found it, without looking up its name again.
func PrepareDebit(r *Record, br *BucketRequest, now int64) bool {
	var buf [8]int
	if len(br.Limits) > len(buf) {
		ok := Prepare(r, br, now)
		if ok {
			Debit(r, br)
		}
		return ok
	}
	found := buf[:len(br.Limits)]
	if !prepare(r, br, now, found) {
		return false
	}
	for i := range br.Limits {
		if a := br.Limits[i].Amount; a != 0 {
			l := &r.Limits[found[i]]
			l.State = bucket.ForceConsume(l.State, a)
		}
	}
	return true
}

// prepare is Prepare; found, unless nil, receives the index in r.Limits
// of each limit of br, in order.
func prepare(r *Record, br *BucketRequest, now int64, found []int) bool {
	if now > r.Refilled {
		for i := range r.Limits {
			l := &r.Limits[i]
			l.State = bucket.RefillBetween(l.State, l.Params, r.Refilled, now)
		}
		r.Refilled = now
	} else {
		// No time passed (the usual case of a busy bucket: calls within
		// one millisecond): Refill would only clamp a balance above the
		// capacity, which refunds may leave.
		for i := range r.Limits {
			if l := &r.Limits[i]; l.State.Tokens >= l.Params.Capacity {
				l.State = bucket.Full(l.Params)
			}
		}
	}
	ok := true
	for i := range br.Limits {
		lr := &br.Limits[i]
		j := r.Find(lr.Name)
		if j < 0 {
			r.Limits = append(r.Limits, LimitState{Name: lr.Name, Params: lr.Params, State: bucket.Full(lr.Params)})
			j = len(r.Limits) - 1
		} else if l := &r.Limits[j]; l.Params != lr.Params {
			l.State = bucket.Reconfigure(l.State, l.Params, lr.Params)
			l.Params = lr.Params
		}
		lr.Observed = r.Limits[j].State
		if found != nil {
			found[i] = j
		}
		if lr.Check && lr.Observed.Tokens < lr.Amount {
			ok = false
		}
	}
	return ok
}

// Debit subtracts br's amounts from r. Call it only after Prepare returned true
// for every bucket of the request.
func Debit(r *Record, br *BucketRequest) {
	for i := range br.Limits {
		lr := &br.Limits[i]
		if lr.Amount == 0 {
			continue
		}
		if j := r.Find(lr.Name); j >= 0 {
			r.Limits[j].State = bucket.ForceConsume(r.Limits[j].State, lr.Amount)
		}
	}
}

// ApplyDelta adds d to r unconditionally and reports whether r has the limit.
func ApplyDelta(r *Record, d Delta) bool {
	j := r.Find(d.Limit)
	if j < 0 {
		return false
	}
	r.Limits[j].State = bucket.ForceConsume(r.Limits[j].State, d.Amount)
	return true
}

// NewRecord returns an empty record refilled at now; Prepare fills it.
func NewRecord(now int64) *Record { return &Record{Refilled: now} }

// IsFull reports whether every limit of r is at capacity at now. A full
// bucket answers every request exactly like a missing one (which is created
// full), so backends may forget full buckets.
func IsFull(r *Record, now int64) bool {
	for _, l := range r.Limits {
		if bucket.RefillBetween(l.State, l.Params, r.Refilled, now).Tokens < l.Params.Capacity {
			return false
		}
	}
	return true
}

// BucketLister lists the buckets of a resource, for capacity reports.
// Backends that can implement it do; Admin.Capacity needs it.
type BucketLister interface {
	// ListBuckets returns the stored buckets of resource in namespace ns
	// whose entity ids are greater than after, sorted by entity id, at most
	// limit (1 to MaxBucketPage). Each record is the whole bucket (a
	// sharded bucket's shards summed) without hidden limits, not refilled.
	// Buckets a backend has forgotten because they were full are missing.
	ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]ListedBucket, error)
}

// MaxBucketPage bounds one page of ListBuckets.
const MaxBucketPage = 1000

// ListedBucket is one bucket of a listing.
type ListedBucket struct {
	Entity string
	Record *Record
}

// ValidateBucketPage checks ListBuckets' arguments.
func ValidateBucketPage(resource string, limit int) error {
	if err := model.ValidateResource(resource); err != nil {
		return err
	}
	if limit < 1 || limit > MaxBucketPage {
		return model.Invalid("limit", strconv.Itoa(limit), "want 1 to "+strconv.Itoa(MaxBucketPage))
	}
	return nil
}

// MaxEntityPage bounds one page of ListEntities.
const MaxEntityPage = model.MaxEntityPage

// MaxConfigPage bounds one page of ListConfigs.
const MaxConfigPage = 1000

// ValidatePage checks the limit of a listing whose pages hold at most max.
func ValidatePage(limit, max int) error {
	if limit < 1 || limit > max {
		return model.Invalid("limit", strconv.Itoa(limit), "want 1 to "+strconv.Itoa(max))
	}
	return nil
}

// MaxAncestry bounds the parent chain CheckAncestry walks: a chain longer
// than this is refused rather than followed.
const MaxAncestry = 1000

// CheckAncestry refuses to make parent the parent of id when id is parent
// or one of its ancestors (a cycle). parentOf returns an entity's parent
// ("" for a root) and whether the entity exists; a missing parent fails
// with model.ErrEntityNotFound. It walks the whole chain from parent up,
// at most MaxAncestry links: the backends call it inside the update's
// lock or transaction where they have one.
func CheckAncestry(id, parent string, parentOf func(id string) (string, bool, error)) error {
	if parent == "" {
		return nil
	}
	cur := parent
	for range MaxAncestry {
		if cur == id {
			return model.Invalid("parent_id", parent, "entity "+id+" would become its own ancestor")
		}
		next, ok, err := parentOf(cur)
		switch {
		case err != nil:
			return err
		case !ok && cur == parent:
			return model.ErrEntityNotFound
		case !ok || next == "":
			return nil // the chain ends (a deleted ancestor ends it too)
		}
		cur = next
	}
	return model.Invalid("parent_id", parent, "its chain of ancestors is longer than "+strconv.Itoa(MaxAncestry))
}

// FirstBuckets sorts a listing by entity and returns its first limit
// buckets: for backends that collect a listing by scanning.
func FirstBuckets(bs []ListedBucket, limit int) []ListedBucket {
	slices.SortFunc(bs, func(a, b ListedBucket) int { return strings.Compare(a.Entity, b.Entity) })
	return bs[:min(len(bs), limit)]
}
