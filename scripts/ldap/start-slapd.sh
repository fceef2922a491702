#!/usr/bin/env bash
# Start a throwaway OpenLDAP slapd (Debian bookworm 2.5.13) in $DIR on 127.0.0.1 ephemeral ports.
# Needs: apt-get install -y slapd ldap-utils openssl   (postinst's system instance is irrelevant)
# Usage: start-slapd.sh DIR   -> prints env lines LDAP_PORT= LDAPS_PORT= LDAP_CA= ; stop: kill $(cat DIR/slapd.pid)
set -euo pipefail
DIR=${1:?dir}; mkdir -p "$DIR"/db "$DIR"/tls; DIR=$(cd "$DIR" && pwd)
freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PORT=$(freeport); SPORT=$(freeport)

# --- TLS: self-signed CA + server cert (SAN localhost + 127.0.0.1) ---
cd "$DIR/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -keyout ca.key -out ca.pem -subj "/CN=Test LDAP CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
  -subj "/CN=localhost" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -out server.pem \
  -extfile <(printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n') 2>/dev/null
chmod 600 ca.key server.key

# --- slapd.conf ---
cat > "$DIR/slapd.conf" <<CONF
include   /etc/ldap/schema/core.schema
include   /etc/ldap/schema/cosine.schema
include   /etc/ldap/schema/nis.schema
include   /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
moduleload ppolicy
pidfile   $DIR/slapd.pid
argsfile  $DIR/slapd.args
loglevel  stats
TLSCACertificateFile  $DIR/tls/ca.pem
TLSCertificateFile    $DIR/tls/server.pem
TLSCertificateKeyFile $DIR/tls/server.key

database  mdb
maxsize   104857600
suffix    "dc=example,dc=org"
rootdn    "cn=admin,dc=example,dc=org"
rootpw    adminpw
directory $DIR/db
index     objectClass eq
index     uid,cn,mail eq
index     member,memberOf eq
overlay   memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
memberof-refint TRUE
overlay   ppolicy
ppolicy_default "cn=default,ou=policies,dc=example,dc=org"
access to attrs=userPassword
  by anonymous auth
  by self write
  by * none
access to *
  by dn.exact="cn=svc-repo,ou=services,dc=example,dc=org" read
  by self read
  by users read
  by * none
CONF

# --- start (as root: -u/-g drop to openldap; as non-root: just omit -u/-g) ---
if [ "$(id -u)" = 0 ]; then chown -R openldap:openldap "$DIR"; UG=(-u openldap -g openldap); else UG=(); fi
/usr/sbin/slapd -f "$DIR/slapd.conf" "${UG[@]}" \
  -h "ldap://127.0.0.1:$PORT/ ldaps://127.0.0.1:$SPORT/" -d 0 >"$DIR/slapd.log" 2>&1 &
for i in $(seq 50); do ldapsearch -x -H "ldap://127.0.0.1:$PORT" -b "" -s base namingContexts >/dev/null 2>&1 && break; sleep 0.1; done

# --- test tree, loaded over LDAP so the memberof overlay maintains memberOf ---
PW() { slappasswd -h '{SSHA}' -s "$1"; }
ldapadd -x -H "ldap://127.0.0.1:$PORT" -D "cn=admin,dc=example,dc=org" -w adminpw >/dev/null <<LDIF
dn: dc=example,dc=org
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=people,dc=example,dc=org
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=org
objectClass: organizationalUnit
ou: groups

dn: ou=services,dc=example,dc=org
objectClass: organizationalUnit
ou: services

dn: ou=policies,dc=example,dc=org
objectClass: organizationalUnit
ou: policies

dn: cn=default,ou=policies,dc=example,dc=org
objectClass: device
objectClass: pwdPolicy
cn: default
pwdAttribute: userPassword
pwdLockout: TRUE
pwdMaxFailure: 0

dn: ou=disabled,dc=example,dc=org
objectClass: organizationalUnit
ou: disabled

dn: cn=svc-repo,ou=services,dc=example,dc=org
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: svc-repo
userPassword: $(PW svcpw)

dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice Admin
sn: Admin
mail: alice@example.org
userPassword: $(PW alicepw)

dn: uid=bob,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: bob
cn: Bob Builder
sn: Builder
mail: bob@example.org
userPassword: $(PW bobpw)

dn: uid=carol,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: carol
cn: Carol Locked
sn: Locked
mail: carol@example.org
employeeType: disabled
userPassword: $(PW carolpw)

dn: uid=dave,ou=disabled,dc=example,dc=org
objectClass: inetOrgPerson
uid: dave
cn: Dave Gone
sn: Gone
userPassword: $(PW davepw)

dn: cn=repo-admins,ou=groups,dc=example,dc=org
objectClass: groupOfNames
cn: repo-admins
member: uid=alice,ou=people,dc=example,dc=org

dn: cn=repo-devs,ou=groups,dc=example,dc=org
objectClass: groupOfNames
cn: repo-devs
member: uid=alice,ou=people,dc=example,dc=org
member: uid=bob,ou=people,dc=example,dc=org
member: uid=carol,ou=people,dc=example,dc=org
LDIF
# carol: locked at the directory level too (ppolicy): any bind as carol -> invalidCredentials (49)
ldapmodify -x -H "ldap://127.0.0.1:$PORT" -D "cn=admin,dc=example,dc=org" -w adminpw >/dev/null <<LDIF
dn: uid=carol,ou=people,dc=example,dc=org
changetype: modify
add: pwdAccountLockedTime
pwdAccountLockedTime: 000001010000Z
LDIF
echo "LDAP_PORT=$PORT"; echo "LDAPS_PORT=$SPORT"; echo "LDAP_CA=$DIR/tls/ca.pem"; echo "SLAPD_PID=$(cat $DIR/slapd.pid)"
