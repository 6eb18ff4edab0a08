// Package apitest builds objects of Flotilla's kinds for the tests of the
// api packages: Fill sets every field of an object, so a test that
// round-trips it sees any field a schema or codec loses.
package apitest
