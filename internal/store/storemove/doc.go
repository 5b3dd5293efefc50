// Package storemove is the seam a store migration crosses: a store's
// content as an export stream (Source) that one driver yields and another
// consumes, so neither driver imports the other and each store's files
// are opened only by its own driver.
package storemove
