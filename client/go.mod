module github.com/eskv/eskv/client

go 1.24

require github.com/eskv/eskv/contract v0.2.0

replace github.com/eskv/eskv/contract => ../contract
