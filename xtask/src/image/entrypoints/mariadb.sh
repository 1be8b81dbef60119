#!/bin/bash
# MariaDB with the official image's common environment: on an empty data directory it creates the
# system tables, sets the root password (MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD or
# MARIADB_RANDOM_ROOT_PASSWORD; MYSQL_* spellings too), creates MARIADB_DATABASE and MARIADB_USER /
# MARIADB_PASSWORD with all rights on it, and runs /docker-entrypoint-initdb.d/*.sql and *.sh.
# Arguments starting with `-` are options for mariadbd.
set -euo pipefail

env_or() { local v="${!1:-}"; if [ -z "$v" ]; then v="${!2:-}"; fi; printf '%s' "$v"; }
sql_quote() { printf "'%s'" "$(printf '%s' "$1" | sed -e "s/\\\\/\\\\\\\\/g" -e "s/'/\\\\'/g")"; }

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then set -- mariadbd "$@"; fi
if [ "$1" != mariadbd ] && [ "$1" != mysqld ]; then exec "$@"; fi
shift

datadir=/var/lib/mysql
as_user=()
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$datadir" /run/mysqld
	chown mysql:mysql "$datadir" /run/mysqld
	as_user=(--user=mysql)
fi

if [ ! -d "$datadir/mysql" ]; then
	root_password=$(env_or MARIADB_ROOT_PASSWORD MYSQL_ROOT_PASSWORD)
	allow_empty=$(env_or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD MYSQL_ALLOW_EMPTY_PASSWORD)
	random=$(env_or MARIADB_RANDOM_ROOT_PASSWORD MYSQL_RANDOM_ROOT_PASSWORD)
	if [ -z "$root_password" ] && [ -z "$allow_empty" ] && [ -z "$random" ]; then
		echo "mariadb: the data directory is empty and no root password is set: set MARIADB_ROOT_PASSWORD," \
			"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD or MARIADB_RANDOM_ROOT_PASSWORD" >&2
		exit 1
	fi
	if [ -n "$random" ] && [ -z "$root_password" ]; then
		root_password=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)
		echo "mariadb: GENERATED ROOT PASSWORD: $root_password"
	fi
	database=$(env_or MARIADB_DATABASE MYSQL_DATABASE)
	user=$(env_or MARIADB_USER MYSQL_USER)
	password=$(env_or MARIADB_PASSWORD MYSQL_PASSWORD)

	echo "mariadb: initialising $datadir"
	mariadb-install-db "${as_user[@]}" --datadir="$datadir" --skip-test-db \
		--auth-root-authentication-method=normal >/dev/null
	socket=/run/mysqld/init.sock
	mariadbd "${as_user[@]}" --datadir="$datadir" --skip-networking --socket="$socket" &
	pid=$!
	for _ in $(seq 60); do
		if mariadb-admin --socket="$socket" ping >/dev/null 2>&1; then break; fi
		sleep 0.5
	done
	{
		echo "SET @@SESSION.SQL_LOG_BIN=0;"
		echo "DELETE FROM mysql.user WHERE user='' OR (user='root' AND host NOT IN ('localhost'));"
		echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_quote "$root_password");"
		echo "CREATE USER 'root'@'%' IDENTIFIED BY $(sql_quote "$root_password");"
		echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
		if [ -n "$database" ]; then
			echo "CREATE DATABASE IF NOT EXISTS \`$database\`;"
		fi
		if [ -n "$user" ]; then
			echo "CREATE USER $(sql_quote "$user")@'%' IDENTIFIED BY $(sql_quote "$password");"
			if [ -n "$database" ]; then
				echo "GRANT ALL ON \`$database\`.* TO $(sql_quote "$user")@'%';"
			fi
		fi
		echo "FLUSH PRIVILEGES;"
	} | mariadb --socket="$socket" -uroot
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sql) mariadb --socket="$socket" -uroot -p"$root_password" ${database:+"$database"} <"$f" ;;
		*.sh) . "$f" ;;
		esac
	done
	mariadb-admin --socket="$socket" -uroot -p"$root_password" shutdown
	wait "$pid" || true
	echo "mariadb: initialised"
fi

exec mariadbd "${as_user[@]}" --datadir="$datadir" --bind-address=0.0.0.0 --port=3306 "$@"
