module github.com/tollgate-rl/tollgate

go 1.26.0

require github.com/oklog/ulid/v2 v2.1.2

require golang.org/x/time v0.16.0 // indirect
