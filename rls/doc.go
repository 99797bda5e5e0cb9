// Package rls serves Envoy's global rate-limit service (gRPC service
// envoy.service.ratelimit.v3.RateLimitService, method ShouldRateLimit) on top
// of a Tollgate limiter, so that Envoy's ratelimit HTTP and network filters
// can enforce Tollgate limits.
//
// A Config maps each Envoy domain to a Tollgate namespace, and descriptor
// rules to an entity, a resource and limits:
//
//	domains:
//	  - domain: edge
//	    namespace: default        # optional, default "default"
//	    descriptors:
//	      - key: api_key          # matches a descriptor with an api_key entry
//	        entity: "{value}"     # the entry's value becomes the entity id
//	        resource: http
//	        limits: ["rps:10/sec"]
//	      - key: remote_address
//	        entity: "ip-{value}"
//	        resource: http
//	        limits: ["rpm:600/min:100"]
//
// Each request descriptor is matched against the rules of its domain in the
// order they are written: the first rule whose key (and value, if the rule
// names one) appears among the descriptor's entries wins. A matched
// descriptor becomes one Tollgate acquire of hits_addend tokens of every
// limit of the rule, committed at once; an unmatched one is answered OK.
// Nested descriptors (lyft/ratelimit style) are not supported. The file
// docs/envoy.md describes the mapping, its limits and an Envoy
// configuration.
package rls
