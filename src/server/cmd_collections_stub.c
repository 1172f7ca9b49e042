/*
 * cmd_collections_stub.c - empty command tables for the collection types, so that the
 * server builds before cmd_hash.c, cmd_list.c, cmd_set.c and cmd_zset.c exist. Each of
 * those files defines its own table (server.h) and removes its two lines here; the last
 * one deletes this file and its line in src/server/CMakeLists.txt.
 */
#include "server.h"

const struct command hash_commands[1] = {{0}};
const size_t hash_commands_count = 0;
const struct command list_commands[1] = {{0}};
const size_t list_commands_count = 0;
const struct command set_commands[1] = {{0}};
const size_t set_commands_count = 0;
const struct command zset_commands[1] = {{0}};
const size_t zset_commands_count = 0;
