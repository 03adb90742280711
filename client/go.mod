module github.com/eskv/eskv/client

go 1.24

require github.com/eskv/eskv/contract v0.1.0

require github.com/google/uuid v1.6.0 // indirect

replace github.com/eskv/eskv/contract => ../contract
