package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Deadlines.
//
// A DynamoDB that stops answering (a stalled process, a network that drops
// packets) holds a caller no longer than one that refuses connections,
// only longer by the call timeout (WithCallTimeout; docs/semantics.md 8):
//
//   - every API call that reads or writes items ends within it, the SDK's
//     attempts and backoffs included, whoever makes it: an acquire's write,
//     a lane's batch that no caller writes, a refund, the reconciler, the
//     change watch, a page of a listing (boundCall, a middleware at the
//     front of the SDK's stack; the calls that manage the table are not
//     bounded, see itemOperations, nor are the item reads and writes of
//     its management, see unbounded);
//   - a request that waits for this process's write to the same bucket
//     item before its own (lane.go) waits no longer than it either.
//
// An operation is not bounded as a whole: under write contention it makes
// as many calls as its retry budget allows (retry.go), each bounded; a
// store that does not answer fails its first call.
//
// A call or a wait the timeout ends fails with an error wrapping
// ErrTimeout, which is not a context error: the caller's context is alive,
// and the limiter takes the failure for the store's (an *UnavailableError,
// whose fail mode decides). A caller's own deadline, when it is the
// earlier, still ends the call with the context's error, as before.
//
// A call made under a context whose deadline is sooner than the timeout
// keeps it, and costs no timer.

// ErrTimeout is wrapped by the error of a call or a wait that the call
// timeout (WithCallTimeout) ended: DynamoDB did not answer in time. A
// timed-out write may have been applied: it may have cost the caller
// tokens, never admitted beyond a limit.
var ErrTimeout = errors.New("dynamodb: no answer within the call timeout")

// CallTimeout returns the call timeout (WithCallTimeout).
func (s *Store) CallTimeout() time.Duration { return s.opts.callTimeout }

// itemOperations are the API calls that read or write items, which the
// call timeout bounds. The calls that manage the table (CreateTable,
// DescribeTable, UpdateTimeToLive ...) are an operator's, not a caller's,
// and DynamoDB may take seconds over them: the HTTP client's timeout
// bounds their attempts.
var itemOperations = map[string]bool{
	"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"Query": true, "Scan": true, "BatchGetItem": true, "BatchWriteItem": true,
	"TransactGetItems": true, "TransactWriteItems": true, "ExecuteStatement": true,
	"BatchExecuteStatement": true, "ExecuteTransaction": true,
}

// boundCalls installs boundCall in the middleware stack of the calls that
// read or write items.
func (s *Store) boundCalls(o *dynamodb.Options) {
	mw := middleware.InitializeMiddlewareFunc("TollgateCallTimeout", s.boundCall)
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if !itemOperations[st.ID()] {
			return nil
		}
		return st.Initialize.Add(mw, middleware.Before)
	})
}

// unboundedKey marks a context whose calls the call timeout does not
// bound: the management of the table (Admin's methods), an operator's, whose first writes to a new
// table DynamoDB (Local, cold, at least) can take seconds over.
type unboundedKey struct{}

// unbounded returns ctx marked for unboundedKey.
func unbounded(ctx context.Context) context.Context {
	return context.WithValue(ctx, unboundedKey{}, true)
}

// boundCall runs one API call, its retries included, within the call
// timeout, or within ctx's deadline if that is sooner (then without a
// timer of its own).
func (s *Store) boundCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	if s.opts.callTimeout <= 0 || ctx.Value(unboundedKey{}) != nil {
		return next.HandleInitialize(ctx, in)
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.opts.callTimeout {
		return next.HandleInitialize(ctx, in)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	out, md, err := next.HandleInitialize(cctx, in)
	return out, md, s.timedOut(ctx, cctx, err)
}

// timedOut returns the error a caller sees of err, which a call made
// under inner (outer with the call timeout) returned: ErrTimeout if
// inner's deadline ended it while outer is alive, err otherwise.
func (s *Store) timedOut(outer, inner context.Context, err error) error {
	if err == nil || outer.Err() != nil || inner.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// The cause's text only: its chain holds context.DeadlineExceeded,
	// which callers take for their own deadline.
	return fmt.Errorf("%w (%v): %v", ErrTimeout, s.opts.callTimeout, err)
}
