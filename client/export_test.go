package client

// LeaseHandle returns a second handle on the lease id, held by c, that
// knows nothing of the lease but its id.
func LeaseHandle(c *Client, id string) *Lease { return &Lease{c: c, id: id} }

// LeaseClosed reports whether le knows it has ended.
func LeaseClosed(le *Lease) bool { return le.isClosed() }

// Abandoning returns how many acquires c is abandoning now.
func Abandoning(c *Client) int { return c.abandoning.Busy() }
