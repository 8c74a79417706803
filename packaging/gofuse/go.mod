// The go-fuse passthrough cryptcost uses as gocryptfs's FUSE baseline:
// go-fuse's own example/loopback, at the go-fuse version Debian 12's
// gocryptfs 2.3 is built with. `make` builds it into .venv/bin.
module cryptcost.local/gofuse

go 1.19

require (
	github.com/hanwen/go-fuse/v2 v2.1.0 // indirect
	golang.org/x/sys v0.0.0-20180830151530-49385e6e1522 // indirect
)
