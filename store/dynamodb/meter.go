package dynamodb

import (
	"strings"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The write-pressure meter.
//
// Every bucket item carries a hidden rate limit, the write-pressure meter:
// each write debits one token, and it refills at the partition limit
// (WithWritePressureLimit). It never refuses anything; a writer that drives
// it into debt doubles the bucket's shard count (split.go). It is named
// with a leading underscore, which user limit names cannot have, and is
// dropped from everything the backend reports.

// pressureLimit is the name of the hidden write-pressure limit, and
// writeCost what one write debits from it (internal/schema: the stream's
// upkeep reads the meter too).
const (
	pressureLimit = schema.PressureLimit
	writeCost     = schema.WriteCost
)

// hidden reports whether limit is an internal one (the meter), which no
// user limit name can be.
func hidden(limit string) bool { return strings.HasPrefix(limit, "_") }

// pressureParams are the meter's parameters: the pressure limit's writes a
// second, with a burst of one second's worth.
func (en *engine) pressureParams() bucket.Params {
	return bucket.Params{Capacity: en.writesPerSecond * writeCost, Amount: en.writesPerSecond * writeCost, Period: 1000}
}

// meterOp is what a write does to the item's write-pressure meter.
type meterOp struct {
	on  bool
	add bool        // ADD v (ticks); else SET v
	v   bucket.Tick // ticks added, or the full tick set
	p   bucket.Params
}

func (o meterOp) apply(img *image, pm bucket.Params) {
	if !o.on {
		return
	}
	i := img.find(pressureLimit)
	if o.add {
		if i >= 0 && img.limits[i].params == pm && !img.limits[i].legacy {
			img.limits[i].ft = img.limits[i].ft.Add(o.v)
		} else if i >= 0 {
			img.limits = append(img.limits[:i], img.limits[i+1:]...) // not known: the next write sets it
		}
		return
	}
	l := imageLimit{name: pressureLimit, params: pm, ft: o.v}
	if i >= 0 {
		img.limits[i] = l
	} else {
		img.limits = append(img.limits, l)
	}
}

// meterOp plans the meter's part of a write made at `at` (a write that
// debits nothing is not metered). The meter measures, it decides nothing:
// it is written without condition, as an ADD when the image shows it not
// full at `at`, else SET afresh. A stale image can make it undercount a
// little (an ADD the full meter absorbs, a SET over another writer's
// count), which only delays a split; this process's own writes to an item
// go one at a time, from the image the previous one returned.
func (en *engine) meterOp(img *image, at int64, debits bool) meterOp {
	if en.writesPerSecond == 0 || !debits {
		return meterOp{}
	}
	pm := en.pressureParams()
	cost := bucket.DebitTicks(writeCost, pm)
	now := bucket.TickAt(at, pm)
	if i := img.find(pressureLimit); i >= 0 {
		if l := &img.limits[i]; l.params == pm && !l.legacy && l.ft.Cmp(now) > 0 {
			return meterOp{on: true, add: true, v: cost, p: pm}
		}
	}
	return meterOp{on: true, v: now.Add(cost), p: pm}
}

// pressured reports whether the meter of img (after a write at `at`) is in
// debt: the item takes more writes than the pressure limit.
func (en *engine) pressured(img *image, at int64) bool {
	if en.writesPerSecond == 0 {
		return false
	}
	i := img.find(pressureLimit)
	if i < 0 || img.limits[i].legacy {
		return false
	}
	return img.stateAt(&img.limits[i], at).Tokens < 0
}

// meterExpr adds the meter's update (no condition).
func meterExpr(e *expr, m meterOp, img *image) {
	if !m.on {
		return
	}
	ft := limitAttr(pressureLimit, fieldFullTick)
	if m.add {
		e.add = append(e.add, e.name(ft)+" "+e.value(tickValue(m.v)))
		return
	}
	e.setV(ft, tickValue(m.v))
	i := img.find(pressureLimit)
	if i < 0 || img.limits[i].params != m.p {
		setParams(e, pressureLimit, m.p)
	}
	if i >= 0 && img.limits[i].legacy {
		e.remove = append(e.remove, e.name(limitAttr(pressureLimit, fieldTokens)), e.name(limitAttr(pressureLimit, fieldRem)))
	}
}
