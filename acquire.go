package tollgate

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Acquire checks and debits consume against every limit in effect for entity
// and resource, and for the cascade ancestors of entity, all or nothing. On
// success the consumption is already written and the returned Lease must be
// ended with Commit or Rollback (concurrency limits are returned then).
//
// A lease that takes concurrency tokens (or asked for WithDurableLease) is
// durable: its record is written with the debit, in one atomic step of the
// store, with an expiry (WithLeaseTTL). If the holder dies, or does not
// end or Extend the lease in time, a reconciler (package reconcile) commits
// it and its tokens come back. A degraded lease has no record.
//
// A denial is a *RateLimitExceeded (errors.Is(err, ErrRateLimited)) listing
// every limit's status; nothing was consumed. Bad input, including an amount
// larger than a limit's capacity (which no wait could satisfy), is a
// *ValidationError. If the store fails, the call returns an *UnavailableError,
// or in Allow mode a lease whose Degraded method reports true.
func (l *Limiter) Acquire(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	return l.acquire(ctx, entity, resource, consume, false, opts)
}

// acquire is Acquire; committing says that AcquireAndCommit calls it,
// and commits the lease at once.
func (l *Limiter) acquire(ctx context.Context, entity, resource string, consume Consume, committing bool, opts []AcquireOption) (*Lease, error) {
	if len(consume) == 0 {
		return nil, model.Invalid("consume", "", "must name at least one limit")
	}
	d := l.getLeaseData()
	for _, o := range opts {
		o(&d.opts)
	}
	d.committing = committing
	now := d.now()
	ns, err := l.plan(ctx, d, entity, resource, consume, now)
	if err == nil {
		var granted bool
		remembered := l.deny != nil && l.refusesFromMemory(d) // see denycache.go
		switch {
		case remembered: // refused as the store would have: see denycache.go
		case d.holds || d.opts.Durable || d.opts.IdempotencyKey != "":
			granted, err = l.consumeDurable(ctx, d, now)
		default:
			granted, err = l.store.Consume(ctx, d.ns, &d.req)
		}
		if err == nil && d.shadow {
			l.noteShadow(d)
		}
		if err == nil {
			l.noteDecision(d, granted)
		}
		l.countMemoHits(d)
		switch {
		case err == nil && granted:
			return d.newLease(d.entityOf(entity), resource), nil
		case err == nil:
			if !remembered {
				l.remember(d)
			}
			err = l.denial(ctx, d)
		case d.opts.IdempotencyKey != "" && errors.Is(err, model.ErrLeaseExists):
			le, rerr := l.replay(ctx, d, entity, resource, consume)
			if rerr == nil {
				return le, nil
			}
			err = rerr
		default:
			err = storeErr(ctx, "acquire", entity+"/"+resource, err)
		}
	}
	l.countMemoHits(d)
	mode := d.opts.OnUnavailable
	d.release()
	return l.failed(ctx, ns, entity, resource, mode, err, now)
}

// plan validates the call and fills d.req with every bucket and limit it
// touches, at now; limits that consume names are
// checked. It returns the namespace id once resolved, also on failure.
// Store failures come back as *UnavailableError.
//
// The request is built in d's recycled buffers, and a field that already
// holds the value it needs (this state's previous request usually had the
// same limit names, and often the same key and entity) is not stored
// again: while the garbage collector marks, which an allocating process has
// it do much of the time, every pointer stored costs a write barrier.
func (l *Limiter) plan(ctx context.Context, d *leaseData, entity, resource string, consume Consume, now unixNano) (string, error) {
	// A recycled state's last request usually had the same entity and
	// resource, often the same strings: an equal string is as valid as
	// the one checked before (equal strings sharing bytes compare at the
	// cost of a pointer).
	if entity != d.validEntity || entity == "" { // "": the memo's zero value
		if err := model.ValidateEntityID(entity); err != nil {
			return "", err
		}
		d.validEntity = entity
	}
	if resource != d.validResource || resource == "" {
		if err := model.ValidateResource(resource); err != nil {
			return "", err
		}
		d.validResource = resource
		d.layout.valid = false // laid out for another resource
	}
	if err := d.opts.Err; err != nil {
		return "", err
	}
	if d.opts.Reservation != "" {
		if err := model.ValidateReservationID(d.opts.Reservation); err != nil {
			return "", err
		}
		// The reservation's audit event is built after the store is
		// read: its write options are checked now, as bad input.
		if err := checkWrite(d.opts.Audit); err != nil {
			return "", err
		}
	}
	var explicit []prepared
	if len(d.opts.Limits) > 0 { // see resetOptions
		explicit = d.explicitLimits()
		// Check what needs no store first, so that a request that can never
		// be granted is refused even while the store is down.
		if err := fitConsume(consume, explicit, entity, resource, &d.amounts); err != nil {
			return "", err
		}
		for i := range explicit {
			if err := d.checkReserved(&explicit[i], d.amounts[i]); err != nil {
				return "", err
			}
		}
	}
	ns, err := l.namespaceID(ctx, now)
	if err != nil {
		return "", err
	}
	setIfChanged(&d.ns, ns)
	if explicit != nil && d.opts.OnUnavailable == "" {
		l.refreshSystemMode(ctx, ns, now)
	}
	chain, err := l.chain(ctx, ns, entity, now, &d.chain, &d.entities, &d.memoHits)
	if err != nil {
		return ns, err
	}
	d.req.Now = now.milli()
	d.shadow = false
	// A request laid out as the state's last one is planned by its
	// amounts alone (plan_layout.go).
	switch {
	case explicit != nil && d.sameLayout(chain):
		return ns, d.refill(consume)
	case explicit == nil && l.sameStoredLayout(d, chain, resource, now):
		if err := fitConsume(consume, d.layout.limits[0], entity, resource, &d.amounts); err != nil {
			return ns, err
		}
		return ns, d.refill(consume)
	}
	d.layout.valid, d.layout.counted = false, false
	buckets, limitBuf, kinds := d.req.Buckets[:0], d.limits[:0], d.kinds[:0]
	reserved := 0 // reserved limits consumed, in every bucket
	plain := true // no reserved limit
	var levels [model.MaxCascadeDepth][]prepared
	for depth, e := range chain {
		id := e.ID
		limits := explicit
		if explicit == nil {
			r, err := l.resolveVia(ctx, ns, id, resource, now, &d.resolutions[depth], &d.memoHits)
			if err != nil {
				return ns, err
			}
			if !r.found {
				return ns, model.Invalid("limits", id+"/"+resource, "no limits are configured for entity "+
					strconv.Quote(id)+" and resource "+strconv.Quote(resource)+" at any level, and none were passed")
			}
			limits = r.limits
			if depth == 0 {
				if err := fitConsume(consume, limits, entity, resource, &d.amounts); err != nil {
					return ns, err
				}
			}
		}
		// d.amounts holds the entity's amounts, checked by fitConsume; an
		// ancestor with stored limits of its own is looked up afresh, and
		// may have a smaller capacity.
		fitted := depth == 0 || explicit != nil
		start := len(limitBuf)
		levels[depth] = limits
		for i := range limits {
			p := &limits[i]
			amount := int64(-1)
			if fitted {
				amount = d.amounts[i]
			} else if n, ok := consume[p.limit.Name]; ok {
				amount = n * bucket.MilliPerToken // in range: fitConsume checked consume
			}
			check := amount >= 0
			if !check {
				amount = 0
			} else if amount > p.params.Capacity && !p.shadow {
				return ns, exceedsCapacity(p.limit, id, bucket.Tokens(amount))
			}
			if check && p.limit.Kind == model.Reserved {
				if err := d.checkReserved(p, amount); err != nil {
					return ns, err
				}
				reserved++
			}
			// Field by field: the thresholds are usually those already
			// there, and copying the whole struct stalled on them.
			var pl *planned
			kinds, pl = extend(kinds)
			pl.kind, pl.shadow, pl.checked, pl.source = p.limit.Kind, p.shadow, check, p.source
			plain = plain && p.limit.Kind != model.Reserved
			if pl.alertAt != p.alertAt {
				pl.alertAt = p.alertAt
			}
			d.shadow = d.shadow || p.shadow && check
			if p.params.Amount == 0 && amount > 0 {
				d.holds = true // a concurrency token taken: the lease is durable
			}
			// Field by field, in place: copying a whole struct goes
			// through the bulk write barrier while the GC marks.
			var lr *store.LimitRequest
			limitBuf, lr = extend(limitBuf)
			setIfChanged(&lr.Name, p.limit.Name)
			// A shadow limit is debited, never checked: the store grants
			// without it, and its status says whether it would have.
			// The parameters field by field too: Params holds a string
			// (the window's zone), so a whole copy takes the bulk write
			// barrier while the GC marks; the zone is usually the same.
			lr.Params.Capacity, lr.Params.Amount, lr.Params.Period = p.params.Capacity, p.params.Amount, p.params.Period
			if lr.Params.Window != p.params.Window {
				lr.Params.Window = p.params.Window
			}
			lr.Check, lr.Amount = check && !p.shadow, amount
			lr.Observed, lr.Wait = bucket.State{}, 0
		}
		var br *store.BucketRequest
		buckets, br = extend(buckets)
		setIfChanged(&br.Key.Entity, id)
		setIfChanged(&br.Key.Resource, resource)
		if lim := limitBuf[start:len(limitBuf):len(limitBuf)]; !sameSlice(br.Limits, lim) {
			br.Limits = lim
		}
		setIfChanged(&br.Entity, e)
		br.Placement, br.Estimated = 0, false
	}
	// Keep the buffers for the next request. They came from d's by extend,
	// which moves to a new array only to grow it: an unchanged capacity
	// means the same array, and then only the length needs storing.
	if cap(buckets) != cap(d.req.Buckets) {
		d.req.Buckets = buckets
	} else {
		d.req.Buckets = d.req.Buckets[:len(buckets)]
	}
	if cap(limitBuf) != cap(d.limits) {
		d.limits = limitBuf[:0]
	}
	// A slice's array pointer takes a write barrier like any pointer,
	// even to an array without pointers: the same array, only the length.
	if cap(kinds) != cap(d.kinds) {
		d.kinds = kinds
	} else {
		d.kinds = d.kinds[:len(kinds)]
	}
	if d.opts.Reservation != "" && reserved == 0 && consume != nil {
		return ns, model.Invalid("consume", d.opts.Reservation, "a reservation takes a token of a reserved limit: "+
			"name one of entity "+strconv.Quote(entity)+"'s reserved limits for resource "+strconv.Quote(resource)+" with 1")
	}
	if plain { // refill does not check reservations
		d.rememberLayout(len(chain), len(kinds), explicit != nil, &levels)
	}
	return ns, nil
}

// entityOf returns the entity of d's first bucket, which plan took from
// the config cache (and which never changes), if its ID is entity, as it
// is after plan; a new one with that ID otherwise (a request rebuilt from
// a lease record has none).
func (d *leaseData) entityOf(entity string) *model.Entity {
	if len(d.req.Buckets) > 0 {
		if e := d.req.Buckets[0].Entity; e != nil && e.ID == entity {
			return e
		}
	}
	return &model.Entity{ID: entity}
}

// checkReserved checks the amount (millitokens, -1: not named) of limit p
// in this call: a reserved limit is consumed only by a reservation, and
// then exactly one token, since a reservation holds one resource.
func (d *leaseData) checkReserved(p *prepared, amount int64) error {
	if p.limit.Kind != model.Reserved || amount < 0 {
		return nil
	}
	name := p.limit.Name
	if d.opts.Reservation == "" {
		return model.Invalid("consume."+name, strconv.FormatInt(bucket.Tokens(amount), 10),
			"limit "+strconv.Quote(name)+" is reserved: name the resource id with WithReservation")
	}
	if amount != bucket.MilliPerToken {
		return model.Invalid("consume."+name, strconv.FormatInt(bucket.Tokens(amount), 10),
			"a reservation takes exactly 1 token of reserved limit "+strconv.Quote(name))
	}
	return nil
}

// setIfChanged stores v in *p unless *p already equals it. Storing a
// pointer (a string's, a slice's, an interface's) costs a write barrier
// while the garbage collector marks; comparing equal strings is cheap when
// they share their bytes, as a key used again usually does.
func setIfChanged[T comparable](p *T, v T) {
	if *p != v {
		*p = v
	}
}

// sameSlice reports whether a and b are the same slice of the same array:
// same first element, length and capacity.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && cap(a) == cap(b) && (cap(a) == 0 || &a[:1][0] == &b[:1][0])
}

// extend returns s one element longer, and a pointer to that element,
// which may hold what an earlier use of the backing array left there.
func extend[T any](s []T) ([]T, *T) {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
	} else {
		var zero T
		s = append(s, zero)
	}
	return s, &s[len(s)-1]
}

// fitConsume checks consume against the entity's limits: every name must be
// a limit in effect, every amount representable, non-negative and within the
// limit's capacity. It sets *amounts, reusing its array, to each limit's
// amount in millitokens, or -1 where consume does not name it. The common
// case costs one map lookup per limit and no iteration over the map.
func fitConsume(consume Consume, limits []prepared, entity, resource string, amounts *[]int64) error {
	if cap(*amounts) < len(limits) {
		*amounts = make([]int64, len(limits))
	}
	*amounts = (*amounts)[:len(limits)] // only the length changes: no write barrier
	a := *amounts
	matched := 0
	for i := range limits {
		p := &limits[i] // not a copy: a prepared limit is 80 bytes
		n, named := consume[p.limit.Name]
		milli, inRange := bucket.Milli(n)
		switch {
		case !named:
			a[i] = -1
			continue
		case n < 0 || !inRange:
			return badConsume(consume, limits, entity, resource)
		case milli > p.params.Capacity && !p.shadow: // a shadow limit never denies
			return exceedsCapacity(p.limit, entity, n)
		}
		a[i] = milli
		matched++
	}
	if matched != len(consume) {
		return badConsume(consume, limits, entity, resource)
	}
	return nil
}

// badConsume explains why consume does not fit limits: an amount is negative
// or too large, or a name is not a limit in effect.
func badConsume(consume Consume, limits []prepared, entity, resource string) error {
	for name, n := range consume {
		if n < 0 {
			return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "must not be negative")
		}
		if n > model.MaxTokens {
			return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "exceeds "+strconv.FormatInt(model.MaxTokens, 10))
		}
		if !hasLimit(limits, name) {
			return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "no limit named "+strconv.Quote(name)+
				" applies to entity "+strconv.Quote(entity)+" and resource "+strconv.Quote(resource))
		}
	}
	return nil
}

func hasLimit(limits []prepared, name string) bool {
	for _, p := range limits {
		if p.limit.Name == name {
			return true
		}
	}
	return false
}

func exceedsCapacity(l model.Limit, entity string, n int64) error {
	return model.Invalid("consume."+l.Name, strconv.FormatInt(n, 10), "exceeds the capacity "+
		strconv.FormatInt(l.Capacity, 10)+" of limit "+strconv.Quote(l.Name)+" of entity "+
		strconv.Quote(entity)+", so it can never be granted")
}

// denial builds the error of a denied request from what the store observed.
func (l *Limiter) denial(ctx context.Context, d *leaseData) error { return l.refusal(ctx, d) }

// refusal is the *RateLimitExceeded of d's request, which the store refused
// (or would: a peek); a refusal by concurrency or reserved limits alone
// says when their holders expire (slotRetry).
func (l *Limiter) refusal(ctx context.Context, d *leaseData) *model.RateLimitExceeded {
	ex := &model.RateLimitExceeded{Statuses: l.statuses(d, false)}
	if onlySlots(ex.Statuses) {
		l.slotRetry(ctx, d, ex.Statuses)
	}
	for _, s := range ex.Statuses {
		if s.Denies() && s.RetryAfter > ex.RetryAfter {
			ex.RetryAfter = s.RetryAfter
		}
	}
	return ex
}

// statuses reports every limit of d's request, with the kinds plan found;
// after a grant, balances are shown after the debit.
func (l *Limiter) statuses(d *leaseData, granted bool) []model.Status {
	var out []model.Status
	k := 0
	for _, b := range d.req.Buckets {
		for _, lr := range b.Limits {
			pl := planned{kind: model.Rate}
			if k < len(d.kinds) {
				pl = d.kinds[k]
			} else if !lr.Params.Refills() {
				pl.kind = model.Concurrency // a request plan did not build: what its buckets tell
			}
			out = append(out, l.status(b.Key, lr, pl, granted, d.req.Now))
			k++
		}
	}
	return out
}

// status is one limit's status at now (Unix ms), the request's time.
func (l *Limiter) status(k store.BucketKey, lr store.LimitRequest, pl planned, granted bool, now int64) model.Status {
	s := model.Status{
		Entity:    k.Entity,
		Resource:  k.Resource,
		Limit:     lr.Name,
		Kind:      pl.kind,
		Capacity:  bucket.Tokens(lr.Params.Capacity),
		Available: bucket.Available(lr.Observed),
		Requested: bucket.Tokens(lr.Amount),
		Shadow:    pl.shadow,
		Source:    sourceNames[pl.source],
	}
	// A shadow limit says whether it would have denied, granted or not.
	if (lr.Check || pl.shadow && pl.checked) && lr.Observed.Tokens < lr.Amount && (!granted || pl.shadow) {
		s.Exceeded = true
		l.setRetry(&s, &lr, now)
	}
	if w := lr.Params.Window; !w.IsZero() {
		i := w.Index(now)
		end := w.Start(i + 1)
		s.ResetsAt = time.UnixMilli(end)
		s.Window = model.DurationMS(end - w.Start(i))
	} else if lr.Params.Refills() {
		s.Window = model.DurationMS(fillMS(lr.Params))
	}
	if granted {
		s.Available = bucket.Available(bucket.ForceConsume(lr.Observed, lr.Amount))
	}
	return s
}

// planned is what plan found of a limit of a request beyond what the
// store needs: its kind, whether it is enforced in shadow, whether the
// request names it (what it would check were it enforced), and its source.
type planned struct {
	kind            model.Kind
	shadow, checked bool
	source          source
	alertAt         [model.MaxAlertAt]float64 // its alert thresholds (decisions.go)
}

// setRetry sets the wait of s, exceeded: for a rate limit the refill it
// needs, exactly, however long (saturated at model.MaxWaitMS); for a
// concurrency or reserved limit, which time does not refill, what it
// waits for (a release) and the limiter's polling hint, or none for a
// reserved limit, until slotRetry finds out more.
func (l *Limiter) setRetry(s *model.Status, lr *store.LimitRequest, now int64) {
	if !lr.Params.Refills() {
		s.Waits = model.WaitsRelease
		if s.Kind != model.Reserved {
			s.RetryAfter, s.RetryAfterMS = l.concurrencyRetry, model.CeilMS(l.concurrencyRetry)
		}
		return
	}
	// bucket.Never here is a refill too long to count (plan refused
	// amounts above the capacity): it saturates, as every wait does.
	ms := bucket.RetryAt(lr.Observed, lr.Params, lr.Amount, now)
	if lr.Wait > 0 {
		ms = lr.Wait
	}
	setWait(s, ms)
}

// setWait sets s's wait to ms milliseconds, in both of its fields.
func setWait(s *model.Status, ms int64) {
	s.RetryAfterMS, s.RetryAfter = ms, model.DurationMS(ms)
}

// fillMS is how long p's refill takes to fill its capacity from empty,
// in milliseconds rounded up (p refills: Amount and Period are positive);
// the 128-bit product keeps the largest capacities exact, and a result
// past the int64 range saturates.
func fillMS(p bucket.Params) int64 {
	hi, lo := bits.Mul64(uint64(p.Capacity), uint64(p.Period))
	if hi >= uint64(p.Amount) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(p.Amount))
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r != 0 {
		q++
	}
	return int64(q)
}
