package rls

import (
	"context"
	"errors"
	"fmt"
	"math"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// Default bounds on a request. A request beyond them is refused with
// codes.InvalidArgument.
const (
	DefaultMaxDescriptors = 64
	DefaultMaxEntries     = 16
	DefaultMaxHitsAddend  = 1_000_000
)

// MaxNameBytes bounds the length of a request's domain and of its
// descriptor entry keys (a longer one is codes.InvalidArgument), and of the
// domains and keys of a Config. Both are names the operator writes in
// Envoy's configuration. Entry values are not bounded here: they come from
// the proxied request (a header, the client address), and a refused call is
// let through by Envoy's default failure_mode_deny: false, so a client could
// escape its limit with a long header. The server's message size
// (Limits.MaxRecvMsgSize) bounds them instead; a value too long for an
// entity id is hashed.
const MaxNameBytes = 256

// LimiterFunc returns the limiter of a namespace. The caller owns the
// limiters (the HTTP server keeps one per namespace); the Service never
// creates a store.
type LimiterFunc func(ctx context.Context, namespace string) (*tollgate.Limiter, error)

// Service answers Envoy's ShouldRateLimit calls with Tollgate. It is safe for
// concurrent use. Create it with New.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	table    table
	cfgErr   error
	limiters LimiterFunc

	maxDescriptors int
	maxEntries     int
	maxHits        uint64
}

// Option configures a Service.
type Option func(*Service)

// WithMaxDescriptors sets how many descriptors a request may carry (default
// 64). Values below 1 keep the default.
func WithMaxDescriptors(n int) Option {
	return func(s *Service) {
		if n > 0 {
			s.maxDescriptors = n
		}
	}
}

// WithMaxEntries sets how many entries a descriptor may carry (default 16).
// Values below 1 keep the default.
func WithMaxEntries(n int) Option {
	return func(s *Service) {
		if n > 0 {
			s.maxEntries = n
		}
	}
}

// WithMaxHitsAddend sets the largest hits_addend a request (or a
// descriptor) may ask for (default 1,000,000). Zero keeps the default.
func WithMaxHitsAddend(n uint64) Option {
	return func(s *Service) {
		if n > 0 {
			s.maxHits = min(n, uint64(model.MaxTokens))
		}
	}
}

// New returns a Service for cfg that gets the limiter of each namespace from
// limiters. New does not fail: a Config from LoadConfig or ParseConfig is
// valid, and if cfg is not (see Config.Validate) every call is answered with
// codes.FailedPrecondition and the configuration error.
func New(cfg *Config, limiters LimiterFunc, opts ...Option) *Service {
	s := &Service{
		limiters:       limiters,
		maxDescriptors: DefaultMaxDescriptors,
		maxEntries:     DefaultMaxEntries,
		maxHits:        DefaultMaxHitsAddend,
	}
	s.table, s.cfgErr = compile(cfg)
	if s.cfgErr == nil && limiters == nil {
		s.cfgErr = errors.New("rls: no limiter function")
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register registers the service on a gRPC server (a *grpc.Server).
func (s *Service) Register(r grpc.ServiceRegistrar) {
	pb.RegisterRateLimitServiceServer(r, s)
}

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
// Every matched descriptor is charged in turn, independently: the overall
// code is OVER_LIMIT if any is over its limit, and descriptors granted
// before or after one that is over stay charged. A bad request is
// codes.InvalidArgument; a store that cannot answer is codes.Unavailable
// unless the limiter's unavailable mode is Allow, which answers OK.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.cfgErr != nil {
		return nil, status.Error(codes.FailedPrecondition, s.cfgErr.Error())
	}
	if err := s.checkRequest(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	descs := req.GetDescriptors()
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, len(descs)),
	}
	dr := s.table[req.GetDomain()] // nil for an unknown domain: nothing matches
	var lim *tollgate.Limiter
	for i, d := range descs {
		r, value := dr.match(d)
		if r == nil || d.GetIsNegativeHits() {
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
			continue
		}
		if lim == nil {
			var err error
			if lim, err = s.limiters(ctx, dr.namespace); err != nil {
				return nil, grpcError(err)
			}
		}
		st, err := charge(ctx, lim, r, r.entityID(value), hits(req, d))
		if err != nil {
			return nil, grpcError(err)
		}
		if st.Code == pb.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = st
	}
	return resp, nil
}

// checkRequest enforces the request's shape and the service's bounds.
func (s *Service) checkRequest(req *pb.RateLimitRequest) error {
	descs := req.GetDescriptors()
	switch {
	case req.GetDomain() == "":
		return errors.New("domain is required")
	case len(req.GetDomain()) > MaxNameBytes:
		return fmt.Errorf("domain of %d bytes: at most %d are allowed", len(req.GetDomain()), MaxNameBytes)
	case len(descs) == 0:
		return errors.New("at least one descriptor is required")
	case len(descs) > s.maxDescriptors:
		return fmt.Errorf("%d descriptors: at most %d are allowed", len(descs), s.maxDescriptors)
	}
	for i, d := range descs {
		if n := len(d.GetEntries()); n > s.maxEntries {
			return fmt.Errorf("descriptors[%d]: %d entries: at most %d are allowed", i, n, s.maxEntries)
		}
		if h := hits(req, d); h > s.maxHits {
			return fmt.Errorf("descriptors[%d]: hits_addend %d exceeds %d", i, h, s.maxHits)
		}
		for j, e := range d.GetEntries() {
			if n := len(e.GetKey()); n > MaxNameBytes {
				return fmt.Errorf("descriptors[%d].entries[%d]: key of %d bytes: at most %d are allowed", i, j, n, MaxNameBytes)
			}
		}
	}
	return nil
}

// hits is what descriptor d asks for: its own hits_addend if set, else the
// request's, where an unset (zero) request hits_addend means 1.
func hits(req *pb.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	if h := req.GetHitsAddend(); h > 0 {
		return uint64(h)
	}
	return 1
}

// grpcError converts a limiter error to a gRPC status error. An
// unavailable store is codes.Unavailable even when its cause is a deadline
// (the store's own: the limiter returns the caller's context errors as
// they are), so that Envoy's failure_mode_deny decides, as for a store
// that refuses connections.
func grpcError(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, tollgate.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, tollgate.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, tollgate.ErrNamespaceNotFound), errors.Is(err, tollgate.ErrNamespaceDeleted):
		code = codes.FailedPrecondition
	}
	return status.Error(code, err.Error())
}

// clamp32 converts n to a uint32, saturating.
func clamp32(n int64) uint32 {
	switch {
	case n <= 0:
		return 0
	case n >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
