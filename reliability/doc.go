// Package reliability holds custody's end-to-end reliability tests. They
// build the real custody binary, serve a ledger with `custody serve` as a
// child process on 127.0.0.1, and drive it over HTTP with package client:
//
//   - TestCrashOverHTTP SIGKILLs the server at random moments under
//     concurrent appends and checks, after each restart, that no
//     acknowledged entry was lost or duplicated, that every checkpoint a
//     client received is consistent with the tree, and that the stored
//     state equals a replay of the log (CUSTODY_LONG=1: 100 rounds).
//   - TestAbuse attacks a running server (slow clients, oversized bodies,
//     invalid signatures, floods of denied statements, thousands of idle
//     connections) while honest agents keep appending, and checks that the
//     server stays up, its memory stays bounded, and nothing it refused is
//     logged.
//
// The package has no code of its own; everything is in its tests.
// Every test is bounded in time and talks only to loopback.
package reliability
