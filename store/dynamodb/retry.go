package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/clock"
)

// Retries.
//
// One store operation (a Consume, a configuration transaction, a batch read
// or delete) gets one retry budget: WithMaxAttempts attempts in all, however
// deeply the paths serving it nest (a cascade through a sharded bucket runs
// the single-bucket path per bucket, which tries up to three shards, each
// through the read path), so retries never multiply. Every retry draws
// from it, and waits as its cause requires:
//   - a lost race (a conditional write failed because another writer made
//     progress, and the item it met came back with the failure): the first
//     immediateRetries of the operation go out at once, later ones back off;
//   - a changed layout (another shard count, a deleted bucket; the cache is
//     corrected): planned again at once, as nothing contends;
//   - contention (a transaction cancelled for a conflict with another
//     transaction or because an item was throttled, batch items left
//     unprocessed): always backs off.
//
// Throttling, 5xx and transport errors of single calls are retried by the
// SDK's retryer (aws.Config), inside each attempt, not by this budget.

// ErrContention is wrapped by the error returned when an operation kept
// losing races with concurrent writers, or kept meeting conflicting or
// throttled transactions, and gave up (see WithMaxAttempts).
var ErrContention = errors.New("dynamodb: gave up under write contention")

// Causes of a retry, as internal errors that the paths return to the loop
// that plans the request. They are compared bare (==): joined with another
// error, that one wins and nothing is retried.
var (
	// errReplan: the request was planned against a bucket layout that has
	// changed (another shard count, a deleted bucket); the cache is updated.
	errReplan = errors.New("dynamodb: bucket layout changed")
	// errLostRace: a conditional write lost to a concurrent writer.
	errLostRace = errors.New("dynamodb: lost a race with a concurrent writer")
	// errContended: a transaction was cancelled for a conflict with another
	// transaction or a throttled item.
	errContended = errors.New("dynamodb: transaction conflict or throttling")
)

// immediateRetries is how many lost races an operation retries without
// sleeping.
const immediateRetries = 4

// Backoff before the n-th sleep of an operation (n from 0): uniform in
// (0, min(backoffBase*2^n, backoffCap)], full jitter so that contending
// writers spread out.
const (
	backoffBase = 5 * time.Millisecond
	backoffCap  = 200 * time.Millisecond
)

// backoffLimit is the longest the n-th sleep of an operation can be.
func backoffLimit(n int) time.Duration {
	return min(backoffBase<<min(n, 16), backoffCap)
}

// maxSleep is the most an operation of maxAttempts attempts can sleep in
// all: every retry backing off.
func maxSleep(maxAttempts int) time.Duration {
	var d time.Duration
	for n := range maxAttempts - 1 {
		d += backoffLimit(n)
	}
	return d
}

// sleepFunc waits d or until ctx ends, returning ctx's error then.
type sleepFunc func(ctx context.Context, d time.Duration) error

func sleepCtx(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, clock.Real{}, d) }

// budget is the retry budget of one operation. It is safe for concurrent
// use: the parallel branches of a cascade share it.
type budget struct {
	max   int // attempts in all
	sleep sleepFunc

	mu        sync.Mutex
	retries   int // retries granted
	immediate int // of those, lost races retried at once
	backoffs  int // of those, retries that slept
}

// retry spends one retry for cause (errReplan, errLostRace or
// errContended), after sleeping as the cause requires. It returns
// ErrContention when the budget is spent (without sleeping), or ctx's error
// if ctx ends first; see giveUp.
func (b *budget) retry(ctx context.Context, cause error) error {
	d, err := b.charge(cause)
	if err != nil {
		return err
	}
	if d == 0 {
		return ctx.Err()
	}
	return b.sleep(ctx, d)
}

// charge spends one retry for cause and returns how long to sleep before
// it, or ErrContention when the budget is spent.
func (b *budget) charge(cause error) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries+1 >= b.max {
		return 0, ErrContention
	}
	b.retries++
	switch {
	case cause == errReplan:
		return 0, nil
	case cause == errLostRace && b.immediate < immediateRetries:
		b.immediate++
		return 0, nil
	}
	limit := backoffLimit(b.backoffs)
	b.backoffs++
	return time.Duration(rand.Int64N(int64(limit))) + 1, nil
}

// giveUp describes err, an error of retry, for the operation what: a spent
// budget as ErrContention naming what and the attempts made; the context's
// error as it is.
func (b *budget) giveUp(err error, what string) error {
	if err == ErrContention {
		return fmt.Errorf("%w: %s after %d attempts", ErrContention, what, b.max)
	}
	return err
}

// retryCause returns err if it is a cause of retry, else nil.
func retryCause(err error) error {
	switch err {
	case errReplan, errLostRace, errContended:
		return err
	}
	return nil
}

// txRetry classifies a failed TransactWriteItems: errContended if it was
// cancelled for a conflict or throttling (or conflicted outright),
// errLostRace if only conditions failed, nil if it is not to be retried
// (another cancellation reason, or any other error).
func txRetry(err error) error {
	if isConflict(err) {
		return errContended
	}
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		return nil
	}
	cause := errLostRace
	for _, r := range canceled.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None", "ConditionalCheckFailed":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
			cause = errContended
		default:
			return nil
		}
	}
	return cause
}

func isConflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}
