/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha2.h"

static const char *h256(const char *s)
{
	static char hex[65];
	uint8_t d[32];
	sha256(s, strlen(s), d);
	sha2_hex(d, 32, hex);
	return hex;
}

static const char *h512(const char *s)
{
	static char hex[129];
	uint8_t d[64];
	sha512(s, strlen(s), d);
	sha2_hex(d, 64, hex);
	return hex;
}

/* FIPS 180-4 examples (NIST CSRC "Examples with intermediate values"). */
Test(sha2, sha256_vectors)
{
	cr_assert_str_eq(h256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	cr_assert_str_eq(h256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	cr_assert_str_eq(h256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
			 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	cr_assert_str_eq(
		h256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
		"cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

Test(sha2, sha512_vectors)
{
	cr_assert_str_eq(h512("abc"), "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
				      "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
	cr_assert_str_eq(h512(""), "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
				   "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e");
	cr_assert_str_eq(h512("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
			 "204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c335"
			 "96fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445");
	cr_assert_str_eq(
		h512("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
		"8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
		"501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909");
}

/* One million 'a's, fed in awkward chunk sizes to cross block edges. */
Test(sha2, million_a_streaming)
{
	char *buf = malloc(1000000);
	char hex[129];
	uint8_t d[64];
	struct sha256_ctx c256;
	struct sha512_ctx c512;
	size_t off = 0, step = 1;

	memset(buf, 'a', 1000000);
	sha256_init(&c256);
	sha512_init(&c512);
	while (off < 1000000) {
		size_t k = step;
		if (k > 1000000 - off)
			k = 1000000 - off;
		sha256_update(&c256, buf + off, k);
		sha512_update(&c512, buf + off, k);
		off += k;
		step = step * 7 % 1031 + 1;
	}
	sha256_final(&c256, d);
	sha2_hex(d, 32, hex);
	cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	sha512_final(&c512, d);
	sha2_hex(d, 64, hex);
	cr_assert_str_eq(hex, "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb"
			      "de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b");
	free(buf);
}

/* Message lengths around the padding boundaries of both block sizes. */
Test(sha2, padding_edges)
{
	static const struct {
		size_t n;
		const char *s256, *s512;
	} v[] = {
		{ 55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072",
		  "db9981645857e59805132f7699e78bbcf39f69380a41aac8e6fa158a0593f2017ffe48764687aa855dae3023fcceefd51a1551d57730423df18503e80ba381ba" },
		{ 56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e",
		  "a9436ec7761f9f0d5fa48e652d72b54622f763b36106e6551900b32f6cd7f4d88dbeaadeb866d7f5311663eda3bbcda04ffb5a8e6779e14b84e95da5327c083e" },
		{ 63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2",
		  "a6662db83dd0037dd13091be284aa0ece35d796b1cefe154a8ae10f7910a1f3cc6a097c0e8d068ca10099c5d0bfead8cefb93d4588b3a546017aa9a0f0509c12" },
		{ 64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c",
		  "791c91ff44685987a5c01d2811eede6f3a28d65e43709953c295931afc4941251e3a5dccbacabaf01dd729589b1c4d47da93f6991c414f21188fb8449a2d1064" },
		{ 111, "5ba60613dba318e9ed9020301e5dc59c721c19d82862e4d03718708aa75d2bad",
		  "9a2a120825c2319867758ec277924f6faa254968bf752046dacdd948d8ad299b10359fd04bfd7d3810b5fa1b16a294236138baff981cbb85248478053ac4d3dd" },
		{ 112, "87bf6e70ecc829aa717756ac6797b82de8b30fca1281ea1659df31949839fc6b",
		  "a3722b515ef40c910f2419f6e0da8ca51d410114ce6272faae64045f9e9f630e7fa8dd5a3243c9860b899d148c3da4bc0f9e07454542604d030bb55531fe0d5b" },
		{ 119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c",
		  "c5df60b24c746cdac9aa906938286db6f9dbb7c419beca41e8189652575b3bc11b6d95931d561179dff68cfbee1d4303ffca81dfe4c5d11f9bcaee2c191ea4be" },
		{ 120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98",
		  "13cdfbc65ba3c85548a7092021c6c0088c2fd745591fbb42dadbe00fbbc94d6894bcd7e9965fff3ab1481453c4b518c15b1938e2c01222ddf75a80c15cb82655" },
		{ 127, "70156a14adbabf98cff3a71c7084b417abf057a8efd27329ca36b7202c87d81f",
		  "1d5a8893e7b7ed83d485d26f88cfb846f3760279916976fe538e539fc16f7cd19ba3e1c2cd5fda78749a74205755cdf694e8fa90b2bfed8815f406af76c1d7bf" },
		{ 128, "24da1b81d0b16df6428eee73c69fcb2a93c76bc6df706f0c6670fe6bfe800464",
		  "e2e22f8422b54b06e35c3ea30a383d1de7a8fbc27992923074103117020d8dd7024c3ecf7d6d1a15a6de5a75ff32fb486b9e8ced4c02ffe05822bf2cb734d0e0" },
	};
	char in[130];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		memset(in, 'x', v[i].n);
		in[v[i].n] = '\0';
		cr_expect_str_eq(h256(in), v[i].s256, "sha256 of %zu bytes", v[i].n);
		cr_expect_str_eq(h512(in), v[i].s512, "sha512 of %zu bytes", v[i].n);
	}
}
