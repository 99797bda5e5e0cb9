package stream

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// heatWindow is how many seconds of an item's writes a Heat weighs: a few
// of the stream's one-second creation times (AWS dates records to the
// second, rounded down), short enough to follow a change of pace.
const heatWindow = 5

// maxHeatItems bounds the items one Heat remembers; past it, those written
// least recently are forgotten first.
const maxHeatItems = 50_000

// maxHeatState bounds the encoded size of a Heat (State): AWS Lambda keeps
// at most 1 MB of tumbling-window state. Past it, the items written least
// in the window are left out.
const maxHeatState = 256 << 10

// Heat is what the upkeep remembers of the recent writes of the bucket
// items of one stream shard: per item and per second of the records'
// creation times, how many writes it took, over the last heatWindow seconds
// of the stream. Items with no write in that window are forgotten, so its size
// follows the shard's busy items, and it needs nothing but the records: the
// process keeps one per stream shard it reads, the Lambda function carries
// one from invocation to invocation in the tumbling window's state (State,
// HeatFromState).
//
// A Heat is not safe for concurrent use.
type Heat struct {
	newest int64                // creation time of the newest record noted, Unix ms; 0: none yet
	items  map[string]*itemHeat // by the bucket item's key (its PK)
}

type itemHeat struct {
	first int64 // the first second (Unix s) it was written since it was last forgotten
	last  int64 // the second of its newest write
	slots [heatWindow]heatSlot
}

// heatSlot is one second of an item's writes; slot i of an itemHeat holds
// a second s with s mod heatWindow = i.
type heatSlot struct {
	sec    int64
	writes int64 // 0: the slot holds no second
}

// NewHeat returns an empty Heat.
func NewHeat() *Heat { return &Heat{items: map[string]*itemHeat{}} }

func (h *Heat) newestSec() int64 { return floorSec(h.newest) }

func floorSec(ms int64) int64 {
	if ms < 0 {
		return (ms - 999) / 1000
	}
	return ms / 1000
}

// windowStart is the first second the window holds.
func (h *Heat) windowStart() int64 { return h.newestSec() - heatWindow + 1 }

// note counts one write of item pk, created at (Unix ms). Writes older
// than the window are ignored.
func (h *Heat) note(pk string, at int64) {
	h.newest = max(h.newest, at)
	sec := floorSec(at)
	if sec < h.windowStart() {
		return
	}
	it := h.items[pk]
	if it == nil {
		it = &itemHeat{first: sec, last: sec}
		h.items[pk] = it
	}
	it.first, it.last = min(it.first, sec), max(it.last, sec)
	s := &it.slots[slotOf(sec)]
	if s.sec != sec {
		*s = heatSlot{sec: sec}
	}
	s.writes++
}

func slotOf(sec int64) int {
	return int(((sec % heatWindow) + heatWindow) % heatWindow)
}

// forgetIdle forgets the items not written within the window, and the
// least recently written beyond maxHeatItems.
func (h *Heat) forgetIdle() {
	from := h.windowStart()
	for pk, it := range h.items {
		if it.last < from {
			delete(h.items, pk)
		}
	}
	if len(h.items) <= maxHeatItems {
		return
	}
	pks := slices.SortedFunc(maps.Keys(h.items), func(a, b string) int {
		return cmp.Compare(h.items[b].last, h.items[a].last)
	})
	for _, pk := range pks[maxHeatItems:] {
		delete(h.items, pk)
	}
}

// forget drops what the heat knows of item pk (after a split changed its
// share of the bucket's writes).
func (h *Heat) forget(pk string) { delete(h.items, pk) }

// rate is item pk's pace in writes per second: the writes of the seconds
// of the window since it was first seen, divided by as many whole seconds.
// The newest second counts though it may not be over, so the rate is never
// above the true average with times to the second (AWS); DynamoDB Local's,
// to the minute, read as one second, make it far above.
func (h *Heat) rate(pk string) float64 {
	it := h.items[pk]
	if it == nil {
		return 0
	}
	to := h.newestSec()
	from := max(h.windowStart(), it.first)
	if from > to {
		return 0
	}
	var writes int64
	for _, s := range it.slots {
		if s.writes > 0 && s.sec >= from && s.sec <= to {
			writes += s.writes
		}
	}
	return float64(writes) / float64(to-from+1)
}

// heatStateKey is the key of the Heat's own entry in its State; item keys
// start with a namespace id, never with '#'.
const heatStateKey = "#heat"

// heatStateVersion names the encoding of State; a state of another version
// is dropped (HeatFromState), costing a window of detection. (Version 1
// also carried what each second consumed, for the proactive refill of
// earlier releases.)
const heatStateVersion = "2"

// State encodes h for AWS Lambda's tumbling-window state: one entry per
// item (its key, and its seconds in the window), and one for h itself. It
// is at most maxHeatState bytes: past that, the items written least in the
// window are left out.
func (h *Heat) State() map[string]string {
	h.forgetIdle()
	out := map[string]string{heatStateKey: heatStateVersion + " " + strconv.FormatInt(h.newest, 10)}
	size := len(heatStateKey) + len(out[heatStateKey])
	from := h.windowStart()
	type entry struct {
		pk, v  string
		writes int64
	}
	entries := make([]entry, 0, len(h.items))
	for pk, it := range h.items {
		var b strings.Builder
		b.WriteString(strconv.FormatInt(it.first, 10))
		var writes int64
		for _, s := range it.slots {
			if s.writes == 0 || s.sec < from {
				continue
			}
			writes += s.writes
			fmt.Fprintf(&b, ";%d,%d", s.sec, s.writes)
		}
		entries = append(entries, entry{pk, b.String(), writes})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.writes, a.writes), strings.Compare(a.pk, b.pk))
	})
	for _, e := range entries {
		if size += len(e.pk) + len(e.v); size > maxHeatState {
			break
		}
		out[e.pk] = e.v
	}
	return out
}

// HeatFromState decodes what State encoded. An empty state is a new Heat.
// What cannot be decoded (another version, a damaged entry) is left out and
// reported in the error; the Heat returned is always usable, since losing
// it costs only a few seconds of detection.
func HeatFromState(state map[string]string) (*Heat, error) {
	h := NewHeat()
	if len(state) == 0 {
		return h, nil
	}
	version, newest, _ := strings.Cut(state[heatStateKey], " ")
	if version != heatStateVersion {
		return h, fmt.Errorf("dynamodb: heat state of version %q, want %s: starting afresh", version, heatStateVersion)
	}
	var err error
	if h.newest, err = strconv.ParseInt(newest, 10, 64); err != nil {
		return NewHeat(), fmt.Errorf("dynamodb: heat state: newest time %q: starting afresh", newest)
	}
	var errs []error
	for pk, v := range state {
		if pk == heatStateKey {
			continue
		}
		it, err := decodeItemHeat(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("dynamodb: heat state of %s: %w", pk, err))
			continue
		}
		h.items[pk] = it
	}
	h.forgetIdle()
	return h, errors.Join(errs...)
}

func decodeItemHeat(v string) (*itemHeat, error) {
	parts := strings.Split(v, ";")
	first, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("first second %q", parts[0])
	}
	it := &itemHeat{first: first, last: first}
	for _, p := range parts[1:] {
		sec, writes, ok := strings.Cut(p, ",")
		var s heatSlot
		var err1, err2 error
		s.sec, err1 = strconv.ParseInt(sec, 10, 64)
		s.writes, err2 = strconv.ParseInt(writes, 10, 64)
		if !ok || err1 != nil || err2 != nil || s.writes <= 0 {
			return nil, fmt.Errorf("second %q", p)
		}
		it.slots[slotOf(s.sec)] = s
		it.first, it.last = min(it.first, s.sec), max(it.last, s.sec)
	}
	return it, nil
}
