package middleware

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate-rl/tollgate/model"
)

// GRPCKeyFunc returns what a call to fullMethod charges (its metadata is in
// ctx: metadata.FromIncomingContext). An error fails the call with
// InvalidArgument, and the handler does not run; so does a zero Entity
// unless WithDefaultEntity names one.
type GRPCKeyFunc func(ctx context.Context, fullMethod string) (Key, error)

// UnaryServerInterceptor runs each unary call holding a lease of a,
// charged as key says: committed when the handler returns, rolled back when
// it panics or fails with a server-side code (Internal, Unknown,
// Unavailable, DataLoss, Unimplemented, DeadlineExceeded). A denied call
// fails with ResourceExhausted and a RetryInfo detail. The RateLimit header
// fields go out as response header metadata (ratelimit-policy, ratelimit),
// on a denial too. WithGRPCSkip runs calls without limits, and
// WithGRPCDenyHandler fails denied calls otherwise.
func UnaryServerInterceptor[L model.Held](a model.Acquirer[L], key GRPCKeyFunc, opts ...Option) grpc.UnaryServerInterceptor {
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if o.grpcSkip != nil && o.grpcSkip(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		le, err := acquireCall(ctx, a, key, info.FullMethod, &o)
		if err != nil {
			return nil, err
		}
		var resp any
		var herr error
		serve(ctx, le, o.log, func(ctx context.Context) bool {
			resp, herr = handler(context.WithValue(ctx, leaseKey{}, model.Held(le)), req)
			return !serverSide(herr)
		})
		return resp, herr
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the
// whole stream runs holding one lease.
func StreamServerInterceptor[L model.Held](a model.Acquirer[L], key GRPCKeyFunc, opts ...Option) grpc.StreamServerInterceptor {
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if o.grpcSkip != nil && o.grpcSkip(ss.Context(), info.FullMethod) {
			return handler(srv, ss)
		}
		le, err := acquireCall(ss.Context(), a, key, info.FullMethod, &o)
		if err != nil {
			return err
		}
		var herr error
		serve(ss.Context(), le, o.log, func(ctx context.Context) bool {
			herr = handler(srv, &leaseStream{ServerStream: ss, ctx: context.WithValue(ctx, leaseKey{}, model.Held(le))})
			return !serverSide(herr)
		})
		return herr
	}
}

// acquireCall acquires for a call, setting its RateLimit metadata, or
// returns the call's status error.
func acquireCall[L model.Held](ctx context.Context, a model.Acquirer[L], key GRPCKeyFunc, method string, o *options) (L, error) {
	var zero L
	k, err := key(ctx, method)
	k, err = o.key(k, err, "the call")
	if err != nil {
		return zero, status.Error(codes.InvalidArgument, err.Error())
	}
	le, err := a.Acquire(ctx, k.Entity, k.Resource, k.Consume, k.Options...)
	if err != nil {
		return zero, o.refusal(ctx, method, k.Entity, err)
	}
	_ = grpc.SetHeader(ctx, o.rateLimitMD(k.Entity, le.Statuses()))
	return le, nil
}

// refusal is the status of a call that was not granted.
func (o *options) refusal(ctx context.Context, method, entity string, err error) error {
	var ex *model.RateLimitExceeded
	switch {
	case errors.As(err, &ex):
		_ = grpc.SetHeader(ctx, o.rateLimitMD(entity, ex.Statuses))
		if o.grpcDeny != nil {
			return o.grpcDeny(ctx, method, ex)
		}
		st := status.New(codes.ResourceExhausted, ex.Error())
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(ex.RetryAfter)}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, model.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, model.ErrUnavailable):
		o.log.Warn("tollgate middleware: the limiter could not decide; refused (fail closed)", "err", err)
		return status.Error(codes.Unavailable, "rate limiter unavailable")
	}
	o.log.Error("tollgate middleware: acquire", "err", err)
	return status.Error(codes.Internal, "rate limiter error")
}

// serverSide reports whether a handler's error is the server's fault, for
// which the lease is rolled back (a client's mistake still spent it).
func serverSide(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.Internal, codes.Unknown, codes.Unavailable, codes.DataLoss, codes.Unimplemented, codes.DeadlineExceeded:
		return true
	}
	return false
}

// rateLimitMD is the RateLimit header fields as gRPC metadata.
func (o *options) rateLimitMD(entity string, sts []model.Status) metadata.MD {
	h := make(map[string][]string)
	hdr := headerMap(h)
	o.setRateLimitHeaders(hdr, entity, sts)
	md := metadata.MD{}
	for k, v := range h {
		md[strings.ToLower(k)] = v
	}
	return md
}

// headerMap lets setRateLimitHeaders write into a plain map.
type headerMap map[string][]string

func (h headerMap) Set(k, v string) { h[k] = []string{v} }

// leaseStream is a server stream whose context carries the lease.
type leaseStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *leaseStream) Context() context.Context { return s.ctx }
