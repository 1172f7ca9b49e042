/*
 * commands.c - the command table of tips-server: the per-type tables of server.h
 * joined, looked up by name, and described as COMMAND reports them.
 *
 * Invariant: the table is read-only; the per-file tables are the only place a command
 * is declared, so lookup, COMMAND COUNT/INFO/DOCS and dispatch can never disagree.
 */
#include "server.h"

#include <ctype.h>
#include <string.h>

struct table {
	const struct command *cmds;
	const size_t *count;
};

static const struct table tables[] = {
	{server_commands, &server_commands_count}, {keys_commands, &keys_commands_count},
	{string_commands, &string_commands_count}, {multi_commands, &multi_commands_count},
	{hash_commands, &hash_commands_count},     {list_commands, &list_commands_count},
	{set_commands, &set_commands_count},       {zset_commands, &zset_commands_count},
};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

const struct command *command_lookup(const char *name, size_t len)
{
	if (len == 0 || len > 64)
		return NULL;
	for (size_t t = 0; t < NTABLES; t++)
		for (size_t i = 0; i < *tables[t].count; i++) {
			const struct command *c = &tables[t].cmds[i];
			if (strlen(c->name) != len)
				continue;
			size_t j = 0;
			while (j < len && tolower((unsigned char)name[j]) == c->name[j])
				j++;
			if (j == len)
				return c;
		}
	return NULL;
}

size_t command_count(void)
{
	size_t n = 0;
	for (size_t t = 0; t < NTABLES; t++)
		n += *tables[t].count;
	return n;
}

const struct command *command_at(size_t i)
{
	for (size_t t = 0; t < NTABLES; t++) {
		if (i < *tables[t].count)
			return &tables[t].cmds[i];
		i -= *tables[t].count;
	}
	return NULL;
}

static const struct {
	unsigned flag;
	const char *name;
} flag_names[] = {
	{CMD_WRITE, "write"},     {CMD_READONLY, "readonly"}, {CMD_DENYOOM, "denyoom"},
	{CMD_ADMIN, "admin"},     {CMD_NOSCRIPT, "noscript"}, {CMD_LOADING, "loading"},
	{CMD_STALE, "stale"},     {CMD_FAST, "fast"},         {CMD_NO_AUTH, "no_auth"},
	{CMD_NO_MULTI, "no_multi"}, {CMD_MOVABLEKEYS, "movablekeys"},
};

void add_reply_command_info(struct client *c, const struct command *cmd)
{
	add_reply_array(c, 10);
	add_reply_bulk_cstr(c, cmd->name);
	add_reply_int(c, cmd->arity);
	int nflags = 0;
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		nflags += (cmd->flags & flag_names[i].flag) != 0;
	add_reply_array(c, nflags);
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (cmd->flags & flag_names[i].flag)
			add_reply_simple(c, flag_names[i].name);
	add_reply_int(c, cmd->first_key);
	add_reply_int(c, cmd->last_key);
	add_reply_int(c, cmd->step);
	add_reply_array(c, 0); /* ACL categories */
	add_reply_array(c, 0); /* tips */
	add_reply_array(c, 0); /* key specifications */
	add_reply_array(c, 0); /* subcommands */
}

void add_reply_command_docs(struct client *c, const struct command *cmd)
{
	add_reply_bulk_cstr(c, cmd->name);
	add_reply_array(c, cmd->args ? 8 : 6);
	add_reply_bulk_cstr(c, "summary");
	add_reply_bulk_cstr(c, cmd->summary ? cmd->summary : "");
	add_reply_bulk_cstr(c, "since");
	add_reply_bulk_cstr(c, "1.0.0");
	add_reply_bulk_cstr(c, "group");
	add_reply_bulk_cstr(c, cmd->group ? cmd->group : "generic");
	if (cmd->args) {
		/* one argument of type string whose name is the whole hint: redis-cli prints
		 * a string argument's name as it is */
		add_reply_bulk_cstr(c, "arguments");
		add_reply_array(c, 1);
		add_reply_array(c, 4);
		add_reply_bulk_cstr(c, "name");
		add_reply_bulk_cstr(c, cmd->args);
		add_reply_bulk_cstr(c, "type");
		add_reply_bulk_cstr(c, "string");
	}
}
