// Package api is the HTTP interface of `packrun serve`: tasks go into the
// queue (POST /v1/tasks), attempts come out of the evidence store, nodes of
// installed packs are invoked directly (POST /v1/invoke), agent messages
// are published to the bus and read back in any format (/v1/messages), and
// /.well-known/packrun describes what this host serves. Every response,
// errors included, is JSON; a refused request changes nothing.
package api
