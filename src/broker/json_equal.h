/*
 * broker/json_equal.h: JSON values compared and hashed by value, as JSON
 * Schema's enum, const and uniqueItems mean them: 1 == 1.0, objects
 * without regard to member order. Pure: no syscalls.
 */
#pragma once
#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>

/* An integer, or a finite real with no fraction. */
bool json_is_integral(const json_t *v);
/* The sign of A - B for two numbers, exact across integers and reals. */
int json_num_cmp(const json_t *a, const json_t *b);
bool json_same(const json_t *a, const json_t *b);
/* Equal values (json_same) hash equal. */
uint64_t json_same_hash(const json_t *v);
