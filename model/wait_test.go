package model_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// probeMS is issue 21's deep debt: 10^12 tokens at 1 a second, about
// 31,700 years.
const probeMS int64 = 1_000_000_000_001_000

func TestDurationMSSaturates(t *testing.T) {
	maxMS := int64(model.MaxWait / time.Millisecond)
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{math.MinInt64, 0},
		{-1, 0},
		{0, 0},
		{1, time.Millisecond},
		{maxMS, time.Duration(maxMS) * time.Millisecond},
		{maxMS + 1, model.MaxWait},
		{probeMS, model.MaxWait},
		{model.MaxWaitMS, model.MaxWait},
	} {
		if got := model.DurationMS(tc.ms); got != tc.want {
			t.Errorf("DurationMS(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

func TestCeilMSAndSecondsDoNotWrap(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{math.MinInt64, 0},
		{-time.Second, 0},
		{0, 0},
		{1, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{model.MaxWait, int64(model.MaxWait/time.Millisecond) + 1}, // 9223372036854.775807 ms
	} {
		if got := model.CeilMS(tc.d); got != tc.want {
			t.Errorf("CeilMS(%d) = %d, want %d", int64(tc.d), got, tc.want)
		}
	}
	for _, tc := range []struct{ ms, want int64 }{
		{math.MinInt64, 0},
		{0, 0},
		{1, 1},
		{2000, 2},
		{2001, 3},
		{probeMS, 1_000_000_000_001},
		{model.MaxWaitMS, model.MaxWaitMS/1000 + 1},
	} {
		if got := model.CeilSeconds(tc.ms); got != tc.want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", tc.ms, got, tc.want)
		}
	}
}

// A refusal's wait in milliseconds is exact beyond MaxWait, and decides
// the primary violation where the durations are equal (both saturated).
func TestRateLimitExceededRetryAfterMS(t *testing.T) {
	ex := &model.RateLimitExceeded{RetryAfter: model.MaxWait, Statuses: []model.Status{
		{Limit: "a", Exceeded: true, RetryAfter: model.MaxWait, RetryAfterMS: int64(model.MaxWait/time.Millisecond) + 5},
		{Limit: "b", Exceeded: true, RetryAfter: model.MaxWait, RetryAfterMS: probeMS},
		{Limit: "c", Exceeded: false, RetryAfterMS: model.MaxWaitMS},
	}}
	if got := ex.RetryAfterMS(); got != probeMS {
		t.Errorf("RetryAfterMS = %d, want %d", got, probeMS)
	}
	if p := ex.Primary(); p.Limit != "b" {
		t.Errorf("Primary = %s, want b, the longest in milliseconds", p.Limit)
	}
	if msg := ex.Error(); !strings.Contains(msg, "retry after 1000000000001000ms") {
		t.Errorf("Error() = %q, want the exact wait", msg)
	}
	// Made by hand, without milliseconds: RetryAfter's.
	hand := &model.RateLimitExceeded{RetryAfter: 1500 * time.Microsecond}
	if got := hand.RetryAfterMS(); got != 2 {
		t.Errorf("RetryAfterMS of a hand-made refusal = %d, want 2", got)
	}
	// A full reserved limit: no wait, a release.
	reserved := &model.RateLimitExceeded{Statuses: []model.Status{
		{Limit: "clusters", Kind: model.Reserved, Exceeded: true, Waits: model.WaitsRelease},
	}}
	if reserved.RetryAfterMS() != 0 || reserved.Waits() != model.WaitsRelease || !strings.Contains(reserved.Error(), "waits for a release") {
		t.Errorf("reserved: %d, %q, %q", reserved.RetryAfterMS(), reserved.Waits(), reserved.Error())
	}
}

// Backoff: refill is exact; a slot is looked at about once a second,
// sooner at a holder's expiry, later if the hint says so.
func TestBackoff(t *testing.T) {
	rate := func(d time.Duration) model.Status {
		return model.Status{Kind: model.Rate, Exceeded: true, RetryAfter: d}
	}
	slot := func(kind model.Kind, d time.Duration, waits string) model.Status {
		return model.Status{Kind: kind, Exceeded: true, RetryAfter: d, Waits: waits}
	}
	for _, tc := range []struct {
		name         string
		sts          []model.Status
		retry        time.Duration
		sleep, least time.Duration
	}{
		{"rate", []model.Status{rate(600 * time.Millisecond)}, 0, 600 * time.Millisecond, 600 * time.Millisecond},
		{"rate, saturated", []model.Status{rate(model.MaxWait)}, 0, model.MaxWait, model.MaxWait},
		{"concurrency, the 100ms hint", []model.Status{slot(model.Concurrency, 100*time.Millisecond, model.WaitsRelease)}, 0, model.SlotPoll, 0},
		{"concurrency, a 5s hint", []model.Status{slot(model.Concurrency, 5*time.Second, model.WaitsRelease)}, 0, 5 * time.Second, 0},
		{"concurrency, expiry in 5 min", []model.Status{slot(model.Concurrency, 5*time.Minute, model.WaitsExpiry)}, 0, model.SlotPoll, 0},
		{"concurrency, expiry in 300ms", []model.Status{slot(model.Concurrency, 300*time.Millisecond, model.WaitsExpiry)}, 0, 300 * time.Millisecond, 0},
		{"reserved, a release", []model.Status{slot(model.Reserved, 0, model.WaitsRelease)}, 0, model.SlotPoll, 0},
		{"concurrency from an older server (no waits)", []model.Status{slot(model.Concurrency, 100*time.Millisecond, "")}, 0, model.SlotPoll, 0},
		{"rate and slot: the longer", []model.Status{rate(3 * time.Second), slot(model.Concurrency, 100*time.Millisecond, model.WaitsRelease)}, 0, 3 * time.Second, 3 * time.Second},
		{"rate shorter than the slot's poll", []model.Status{rate(200 * time.Millisecond), slot(model.Concurrency, time.Minute, model.WaitsExpiry)}, 0, model.SlotPoll, 200 * time.Millisecond},
		{"not exceeded: ignored", []model.Status{{Kind: model.Rate, RetryAfter: time.Hour}, rate(time.Second)}, 0, time.Second, time.Second},
		{"no statuses: RetryAfter", nil, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{"at least a millisecond", nil, 0, time.Millisecond, 0},
	} {
		ex := &model.RateLimitExceeded{Statuses: tc.sts, RetryAfter: tc.retry}
		sleep, least := ex.Backoff()
		if sleep != tc.sleep || least != tc.least {
			t.Errorf("%s: Backoff = %v, %v; want %v, %v", tc.name, sleep, least, tc.sleep, tc.least)
		}
	}
}
